// Offline support: the app shell and every bundle file up to MAX_CACHED_BYTES are served from the
// cache when the network fails, and refreshed from the network otherwise. Larger files (a
// paper-scale bundle's embeddings are ~740 MB) are not cached: writing them to Cache Storage
// while they stream to the page tripled the time to first heatmap (80 s against 28 s, BENCHMARKS.md).
const CACHE = "culturelens-v2";
const MAX_CACHED_BYTES = 64 * 1024 * 1024;
self.addEventListener("install", (e) => { self.skipWaiting(); });
self.addEventListener("activate", (e) => {
  e.waitUntil(caches.keys()
    // Older app-shell caches go; the classroom lens's model cache (culturelens-models-*) stays.
    .then((keys) => Promise.all(keys.filter((k) => k !== CACHE && !k.startsWith("culturelens-models-"))
      .map((k) => caches.delete(k))))
    .then(() => self.clients.claim()));
});
self.addEventListener("fetch", (e) => {
  // Ranged reads (the classroom lens reads safetensors headers so) go straight to the network:
  // a partial response cannot be cached.
  if (e.request.method !== "GET" || e.request.headers.has("range")) return;
  e.respondWith(caches.open(CACHE).then(async (cache) => {
    const hit = await cache.match(e.request);
    const net = fetch(e.request).then((r) => {
      const size = Number(r.headers.get("content-length") ?? 0);
      if (r.ok && size <= MAX_CACHED_BYTES) cache.put(e.request, r.clone());
      return r;
    });
    return hit ? (net.catch(() => hit), hit) : net;
  }));
});
