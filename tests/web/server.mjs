// A tiny static file server on 127.0.0.1 (random port) for the browser tests: `/` is the built
// app (web/dist), `/bundles/` a folder of test bundles. It answers `Range: bytes=A-B` with 206 (as
// a hub or any static host does; the classroom lens reads safetensors headers so) and records every
// request it serves in `server.requests` (method, path, range), so a test can count downloads.
import http from "node:http";
import fs from "node:fs";
import path from "node:path";

const TYPES = {
  ".html": "text/html", ".js": "text/javascript", ".mjs": "text/javascript", ".wasm": "application/wasm",
  ".css": "text/css", ".webp": "image/webp", ".json": "application/json", ".csv": "text/csv", ".jpg": "image/jpeg", ".png": "image/png",
};

// Files are read in 1 MiB pieces (Node's default is 64 KiB): a 772 MB bundle then costs this
// server about 0.4 s of CPU instead of 1.3 s (`curl` from it: 0.5 s instead of 1.3 s), time the
// browser beside it on a 2-core machine would otherwise lose (scripts/bench/web_bench.py). A static
// host with sendfile costs less still.
const READ = { highWaterMark: 1 << 20 };

export function serve(mounts) {
  const requests = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url, "http://127.0.0.1");
    requests.push({ method: req.method, path: decodeURIComponent(url.pathname), range: req.headers.range || null });
    const prefix = Object.keys(mounts).sort((a, b) => b.length - a.length).find((p) => url.pathname.startsWith(p));
    if (prefix === undefined) { res.writeHead(404); res.end(); return; }
    const root = path.resolve(mounts[prefix]);
    let file = path.resolve(root, "." + decodeURIComponent(url.pathname.slice(prefix.length - 1)));
    if (!file.startsWith(root)) { res.writeHead(403); res.end(); return; }
    if (fs.existsSync(file) && fs.statSync(file).isDirectory()) file = path.join(file, "index.html");
    fs.stat(file, (err, st) => {
      if (err || !st.isFile()) { res.writeHead(404); res.end("not found"); return; }
      const type = TYPES[path.extname(file)] || "application/octet-stream";
      const range = /^bytes=(\d+)-(\d*)$/.exec(req.headers.range || "");
      if (range) {
        const start = Number(range[1]);
        const end = Math.min(range[2] === "" ? st.size - 1 : Number(range[2]), st.size - 1);
        if (start > end) { res.writeHead(416, { "content-range": `bytes */${st.size}` }); res.end(); return; }
        res.writeHead(206, { "content-type": type, "content-length": end - start + 1,
          "content-range": `bytes ${start}-${end}/${st.size}`, "accept-ranges": "bytes" });
        fs.createReadStream(file, { ...READ, start, end }).pipe(res);
        return;
      }
      res.writeHead(200, { "content-type": type, "content-length": st.size, "accept-ranges": "bytes" });
      fs.createReadStream(file, READ).pipe(res);
    });
  });
  server.requests = requests;
  return new Promise((resolve) => server.listen(0, "127.0.0.1", () => resolve(server)));
}
