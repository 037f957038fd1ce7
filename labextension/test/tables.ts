/**
 * Tables as the server writes them (`betty_jupyter.agent.wire`): columns with their types,
 * rows as lists of cells.
 */
import { ColumnType, ITable } from '../src/models';

/** A table of `records` with these columns (a record's missing cell is null). */
export function tableOf(columns: [string, ColumnType][], records: Record<string, unknown>[]): ITable {
  return {
    columns: columns.map(([name, type]) => ({ name, type })),
    rows: records.map(record => columns.map(([name]) => record[name] ?? null))
  };
}

/** The columns of `cluster_queue`'s table that the Jobs tab reads. */
export const QUEUE_COLUMNS: [string, ColumnType][] = [
  ['job_id', 'string'],
  ['array_job_id', 'string'],
  ['name', 'string'],
  ['user', 'string'],
  ['partition', 'string'],
  ['state', 'string'],
  ['reason', 'string'],
  ['elapsed', 'duration'],
  ['time_limit', 'duration'],
  ['gpus', 'integer'],
  ['gpu_type', 'string'],
  ['tasks', 'integer']
];
