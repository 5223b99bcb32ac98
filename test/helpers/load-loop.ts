// A separate process that posts one JSON body back to back over N connections until SIGTERM,
// then prints how many succeeded. Tests that time something in their own process use it so
// that generating load does not add to the latencies they measure.
import { argv } from "node:process";

// `node --test dist/test/` also runs this file, without arguments: then there is nothing to do.
if (argv.length < 4) process.exit(0);
const [url, body, concurrency] = [argv[2]!, argv[3]!, Number(argv[4] ?? 1)];
let ok = 0;
let failed = 0;
let stop = false;

process.on("SIGTERM", () => {
  stop = true;
});

await Promise.all(
  Array.from({ length: concurrency }, async () => {
    while (!stop) {
      const res = await fetch(url, { method: "POST", headers: { "content-type": "application/json" }, body });
      await res.arrayBuffer();
      if (res.status === 200) ok++;
      else failed++;
    }
  }),
);
process.stdout.write(JSON.stringify({ ok, failed }));
