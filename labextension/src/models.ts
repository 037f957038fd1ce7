/**
 * Wire models of Betty's REST API, mirroring `betty_jupyter/server/models.py` one to one.
 */

/** Answer of `GET /betty/api/health`. */
export interface IHealth {
  status: 'ok';
  version: string;
  clusters: string[];
  default_cluster: string | null;
}
