import http from "node:http";
import { HTTP } from "cloudevents";
http.createServer((req, res) => {
  const chunks = [];
  req.on("data", (c) => chunks.push(c));
  req.on("end", () => {
    const body = Buffer.concat(chunks).toString();
    let ev;
    try { ev = HTTP.toEvent({ headers: req.headers, body }); } catch (e) { ev = { error: String(e) }; }
    const ce = Object.fromEntries(Object.entries(req.headers).filter(([k]) => k.startsWith("ce-") || k === "content-type"));
    console.log(JSON.stringify({ ce, body, parsed: ev }));
    res.writeHead(202).end();
  });
}).listen(42090, "127.0.0.1");
