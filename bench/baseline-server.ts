// What the bench's baseline servers (naive-server.ts, bare-oip-server.ts) share: each request's
// body read whole and handed to the server's own code, which answers it (a 500 with the error
// when it throws); listening on 127.0.0.1 with {"address":"http://127.0.0.1:PORT"} printed on
// stdout once it does; closing on SIGTERM.
import { createServer, type IncomingMessage, type ServerResponse } from "node:http";
import type { AddressInfo } from "node:net";

export function serveBaseline(
  port: number,
  answer: (body: Buffer, req: IncomingMessage, res: ServerResponse) => Promise<void>,
): void {
  const server = createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on("data", (c: Buffer) => chunks.push(c));
    req.on("end", async () => {
      try {
        await answer(Buffer.concat(chunks), req, res);
      } catch (err) {
        res.writeHead(500, { "content-type": "application/json" });
        res.end(JSON.stringify({ error: String(err) }));
      }
    });
  });
  server.listen(port, "127.0.0.1", () => {
    const { port: listening } = server.address() as AddressInfo;
    process.stdout.write(`${JSON.stringify({ address: `http://127.0.0.1:${listening}` })}\n`);
  });
  process.on("SIGTERM", () => {
    server.close(() => process.exit(0));
    server.closeAllConnections();
  });
}
