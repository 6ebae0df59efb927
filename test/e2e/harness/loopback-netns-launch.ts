// Runs inside the network namespace harness/loopback-netns.ts made:
//   node loopback-netns-launch.ts <unix socket> <host:port> -- <argv...>
// Brings the namespace's loopback up, serves <host:port> on it by passing each connection to the
// Unix socket (the apiserver outside), then runs argv and exits as it does.
import { execFileSync, spawn } from "node:child_process";
import { connect, createServer } from "node:net";

const [socketPath, listen, separator, ...argv] = process.argv.slice(2);
if (!socketPath || !listen || separator !== "--" || argv.length === 0) {
  console.error("usage: loopback-netns-launch.ts <unix socket> <host:port> -- <argv...>");
  process.exit(2);
}
execFileSync("ip", ["link", "set", "lo", "up"]);
const host = listen.slice(0, listen.lastIndexOf(":"));
const port = Number(listen.slice(listen.lastIndexOf(":") + 1));
const server = createServer((inside) => {
  const outside = connect(socketPath);
  const both = () => {
    inside.destroy();
    outside.destroy();
  };
  inside.on("error", both);
  outside.on("error", both);
  inside.pipe(outside);
  outside.pipe(inside);
});
server.listen(port, host, () => {
  const child = spawn(argv[0]!, argv.slice(1), { stdio: "inherit" });
  // The harness signals the whole process group: the child has the signal already; wait for it.
  for (const signal of ["SIGTERM", "SIGINT"] as const) process.on(signal, () => {});
  child.once("exit", (code, signal) => process.exit(code ?? (signal ? 128 + 9 : 1)));
  child.once("error", (error) => {
    console.error(`loopback-netns-launch: ${error.message}`);
    process.exit(127);
  });
});
