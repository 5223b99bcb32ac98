// The dashboard's only way to the server: same-origin fetches with relative paths (so it works
// behind a proxy that serves modelport under a path prefix), each with the API key the page asked
// for as `Authorization: Bearer`. The key lives in sessionStorage: this tab only, gone when it
// closes. A 401 tells the page to ask for the key again.

const STORAGE = "modelport.apiKey";

export function getKey(): string {
  try {
    return sessionStorage.getItem(STORAGE) ?? "";
  } catch {
    return "";
  }
}

export function setKey(key: string): void {
  try {
    if (key) sessionStorage.setItem(STORAGE, key);
    else sessionStorage.removeItem(STORAGE);
  } catch {
    // storage disabled: the key lasts until the page reloads
  }
  memoryKey = key;
}

let memoryKey = getKey();
let onUnauthorized: (() => void) | undefined;

/** Called on every 401 (no key, or a wrong one). */
export function whenUnauthorized(f: () => void): void {
  onUnauthorized = f;
}

export class ApiError extends Error {
  constructor(
    message: string,
    readonly status: number,
    readonly code?: string,
  ) {
    super(message);
  }
}

export interface CallOptions {
  method?: string;
  json?: unknown;
  /** A periodic poll: marked so that the server logs a successful one at debug only. */
  poll?: boolean;
  signal?: AbortSignal;
}

/** A relative path (`v1/models`) with the key; throws ApiError on a non-2xx answer. */
export async function call(path: string, options: CallOptions = {}): Promise<Response> {
  const headers: Record<string, string> = {};
  if (memoryKey) headers.authorization = `Bearer ${memoryKey}`;
  if (options.json !== undefined) headers["content-type"] = "application/json";
  if (options.poll) headers["x-modelport-poll"] = "1";
  const res = await fetch(path, {
    method: options.method ?? "GET",
    headers,
    ...(options.json !== undefined ? { body: JSON.stringify(options.json) } : {}),
    ...(options.signal ? { signal: options.signal } : {}),
    cache: "no-store",
  });
  if (res.ok) return res;
  if (res.status === 401) onUnauthorized?.();
  let message = `${res.status} ${res.statusText}`;
  let code: string | undefined;
  try {
    const body = (await res.json()) as { error?: unknown; code?: string; message?: string };
    const e = body.error;
    if (e && typeof e === "object") {
      const o = e as { message?: string; code?: string };
      message = `${res.status}: ${o.message ?? message}`;
      code = o.code;
    } else if (typeof e === "string") {
      message = `${res.status}: ${e}`;
      code = body.code;
    }
  } catch {
    // not JSON
  }
  throw new ApiError(message, res.status, code);
}

export async function callJson<T>(path: string, options: CallOptions = {}): Promise<T> {
  return (await (await call(path, options)).json()) as T;
}
