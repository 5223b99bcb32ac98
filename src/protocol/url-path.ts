// A request target's path: the part before its query string. On every request (auth, tracing,
// limits), so found with indexOf rather than split(), which costs a runtime call and an array.

/** `url` (a request target, such as "/v1/models?x=1") without its query string. */
export function urlPath(url: string): string {
  const q = url.indexOf("?");
  return q < 0 ? url : url.slice(0, q);
}
