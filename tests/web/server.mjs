// A tiny static file server on 127.0.0.1 (random port) for the browser tests: `/` is the built
// app (web/dist), `/bundles/` a folder of test bundles.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";

const TYPES = {
  ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm",
  ".css": "text/css", ".json": "application/json", ".csv": "text/csv", ".jpg": "image/jpeg", ".png": "image/png",
};

export function serve(mounts) {
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    const prefix = Object.keys(mounts).sort((a, b) => b.length - a.length).find((p) => url.pathname.startsWith(p));
    if (prefix === undefined) { res.writeHead(404); res.end(); return; }
    const root = path.resolve(mounts[prefix]);
    let file = path.resolve(root, "." + decodeURIComponent(url.pathname.slice(prefix.length - 1)));
    if (!file.startsWith(root)) { res.writeHead(403); res.end(); return; }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, "index.html");
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) { res.writeHead(404); res.end("not found"); return; }
      res.writeHead(200, { "content-type": TYPES[path.extname(file)] || "application/octet-stream", "content-length": st.size });
      fs.createReadStream(file).pipe(res);
    });
  });
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
