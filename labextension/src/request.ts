import { URLExt } from '@jupyterlab/coreutils';
import { ServerConnection } from '@jupyterlab/services';

import { API_GPUS, API_NAMESPACE, REQUEST_TIMEOUT_MS } from './constants';

/** The language JupyterLab shows (the translator's `languageCode`, "zh-CN"); "" until the plugin says it. */
let language = '';

/**
 * Set once by the plugin from the translator: the server's `words` (GET tfgpu/api/gpus) and the kernel's messages
 * (the comm's opening, comm.ts) then come in this language rather than the server's or kernel's locale.
 */
export function setLanguage(code: string | null | undefined): void {
  language = typeof code === 'string' ? code : '';
}

/** The language the server and the kernel are asked to answer in ("" : theirs). */
export function currentLanguage(): string {
  return language;
}

/**
 * Call the tfgpu_magic server extension: `endPoint` below `<base url>/tfgpu/api/`.
 *
 * Resolves with the parsed JSON body. Rejects with `ServerConnection.NetworkError` when the server
 * does not answer, and with `ServerConnection.ResponseError` (its `response.status` set) when it answers
 * with an error status, e.g. 404 while the server extension is not enabled. A server that has not answered
 * within `timeoutMs` counts as not answering (NetworkError): the sidebar then says so instead of waiting.
 * `query` becomes the URL's query string (`{history: '600'}`: `?history=600`).
 */
export async function requestAPI<T>(
  endPoint = '',
  init: RequestInit = {},
  timeoutMs = REQUEST_TIMEOUT_MS,
  query: Record<string, string> = {}
): Promise<T> {
  const settings = ServerConnection.makeSettings();
  if (language && endPoint === API_GPUS && !('language' in query)) {
    query = { ...query, language };
  }
  const search = Object.keys(query).length ? URLExt.objectToQueryString(query) : '';
  const url = URLExt.join(settings.baseUrl, ...API_NAMESPACE, endPoint) + search;

  const abort = new AbortController();
  const timer = setTimeout(() => abort.abort(), timeoutMs);
  let response: Response;
  let data: any;
  try {
    response = await ServerConnection.makeRequest(url, { ...init, signal: abort.signal }, settings);
    data = await response.text();
  } catch (error) {
    throw new ServerConnection.NetworkError(error as TypeError);
  } finally {
    clearTimeout(timer);
  }

  if (data.length > 0) {
    try {
      data = JSON.parse(data);
    } catch {
      // Not JSON (an HTML error page, say): kept as text for the error below.
    }
  }
  if (!response.ok) {
    const message = typeof data === 'object' && data !== null && data.message ? data.message : '';
    throw new ServerConnection.ResponseError(response, message);
  }
  return data as T;
}
