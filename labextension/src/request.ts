/**
 * The one typed request helper: every REST call of the side panel goes through it,
 * so authentication (token and XSRF) and error handling live in one place.
 */
import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

/** The namespace of Betty's REST API on the Jupyter server. */
export const API_NAMESPACE = 'betty/api';

/** An error answer from Betty's server extension, with its one-line message. */
export class BettyRequestError extends Error {
  constructor(
    message: string,
    readonly status: number
  ) {
    super(message);
    this.name = 'BettyRequestError';
  }
}

/**
 * Call `endpoint` under `/betty/api/` and return the parsed JSON body.
 *
 * Throws `BettyRequestError` with the server's one-line message when the answer is not 2xx.
 */
export async function requestAPI<T>(
  endpoint: string,
  init: RequestInit = {},
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<T> {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endpoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, init, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  const text = await response.text();
  let body: any = null;
  if (text.length > 0) {
    try {
      body = JSON.parse(text);
    } catch {
      body = { message: text };
    }
  }
  if (!response.ok) {
    // Betty answers `{"error": …}`; Jupyter's own errors (403, 404 of a missing route) `{"message": …}`.
    const message = body?.error ?? body?.message ?? `${response.status} ${response.statusText}`;
    throw new BettyRequestError(message, response.status);
  }
  return body as T;
}

/**
 * Fetch `endpoint` under `/betty/api/` as bytes (a download), with the same authentication as
 * {@link requestAPI}; an error answer throws `BettyRequestError` with its one-line message.
 */
export async function requestBlob(
  endpoint: string,
  settings: ServerConnection.ISettings = ServerConnection.makeSettings()
): Promise<Blob> {
  const url = URLExt.join(settings.baseUrl, API_NAMESPACE, endpoint);
  let response: Response;
  try {
    response = await ServerConnection.makeRequest(url, { method: 'GET' }, settings);
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  }
  if (!response.ok) {
    let message = `${response.status} ${response.statusText}`;
    try {
      const body = await response.json();
      message = body?.error ?? body?.message ?? message;
    } catch {
      // not JSON: the status line says it
    }
    throw new BettyRequestError(message, response.status);
  }
  return response.blob();
}
