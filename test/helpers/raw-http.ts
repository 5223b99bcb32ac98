// Sends bytes over a plain TCP socket and parses the HTTP response, for requests that fetch()
// would refuse to send (malformed request lines, header names or lengths), so the server, not
// the client library, is what a test exercises.
import { connect } from "node:net";

export interface RawResponse {
  status: number;
  headers: Record<string, string>;
  body: string;
}

/** Writes `request` as is to the server at `url` and reads one response (the socket is closed after it). */
export function rawRequest(url: string, request: string | Buffer, timeoutMs = 30_000): Promise<RawResponse> {
  const { hostname, port } = new URL(url);
  return new Promise((resolve, reject) => {
    const socket = connect(Number(port), hostname);
    let data = Buffer.alloc(0);
    const timer = setTimeout(() => {
      socket.destroy();
      reject(new Error(`no complete response in ${timeoutMs} ms; got ${JSON.stringify(String(data))}`));
    }, timeoutMs);
    const finish = (): boolean => {
      const text = data.toString("latin1");
      const end = text.indexOf("\r\n\r\n");
      if (end < 0) return false;
      const [statusLine, ...lines] = text.slice(0, end).split("\r\n");
      const headers: Record<string, string> = {};
      for (const line of lines) {
        const i = line.indexOf(":");
        headers[line.slice(0, i).trim().toLowerCase()] = line.slice(i + 1).trim();
      }
      const body = data.subarray(Buffer.byteLength(text.slice(0, end + 4), "latin1"));
      const length = headers["content-length"] === undefined ? undefined : Number(headers["content-length"]);
      if (length === undefined ? !socket.readableEnded : body.length < length) return false;
      clearTimeout(timer);
      socket.destroy();
      resolve({
        status: Number(/^HTTP\/1\.[01] (\d{3})/.exec(statusLine ?? "")?.[1] ?? 0),
        headers,
        body: body.subarray(0, length ?? body.length).toString("utf8"),
      });
      return true;
    };
    socket.on("data", (chunk: Buffer) => {
      data = Buffer.concat([data, chunk]);
      finish();
    });
    socket.on("end", () => {
      if (!finish()) {
        clearTimeout(timer);
        reject(
          new Error(`the connection closed without a complete response: ${JSON.stringify(String(data))}`),
        );
      }
    });
    socket.on("error", (err) => {
      clearTimeout(timer);
      reject(err);
    });
    socket.write(request);
  });
}
