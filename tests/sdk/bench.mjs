// The gateway benchmark's SDK side (tests/sdk/bench.sh).
//
//   node bench.mjs prepare ENDPOINT KEY SIGFILE   creates database "bench",
//       container "items" (/pk) with ITEMS items, and writes SIGFILE: the
//       requests wrk replays against the REST API, signed in advance
//   node bench.mjs run ENDPOINT KEY OP SECONDS CONCURRENCY
//       drives OP (read, create, query) through @azure/cosmos for SECONDS
//       with CONCURRENCY calls in flight; prints a RESULT line
import { writeFileSync } from "node:fs";
import { createHmac } from "node:crypto";
import { performance } from "node:perf_hooks";
import { CosmosClient, BulkOperationType } from "@azure/cosmos";

export const ITEMS = 1000, PARTITIONS = 100;
const PAYLOAD = "x".repeat(200);

function doc(id, pk) {
  return { id, pk, n: Number(id.slice(1)) || 0, title: "a benchmark item", payload: PAYLOAD };
}

function sign(key, verb, type, link, date) {
  const text = `${verb.toLowerCase()}\n${type}\n${link}\n${date.toLowerCase()}\n\n`;
  const sig = createHmac("sha256", Buffer.from(key, "base64")).update(text).digest("base64");
  return encodeURIComponent(`type=master&ver=1.0&sig=${sig}`);
}

async function prepare(endpoint, key, sigfile) {
  const client = new CosmosClient({ endpoint, key });
  const { database } = await client.databases.createIfNotExists({ id: "bench" });
  const { container } = await database.containers.createIfNotExists({ id: "items",
    partitionKey: { paths: ["/pk"] } });
  for (let at = 0; at < ITEMS; at += 100) {
    const ops = [];
    for (let i = at; i < at + 100; i++) {
      const pk = `p${i % PARTITIONS}`;
      ops.push({ operationType: BulkOperationType.Upsert, partitionKey: pk,
        resourceBody: doc(`i${i}`, pk) });
    }
    const res = await container.items.executeBulkOperations(ops);
    for (const r of res) if (!r.response || r.response.statusCode >= 300) throw new Error("preload failed");
  }
  // one line per request: the date, then the signatures wrk sends
  const date = new Date().toUTCString();
  const lines = [date, sign(key, "POST", "docs", "dbs/bench/colls/items", date)];
  for (let i = 0; i < ITEMS; i++) {
    lines.push(sign(key, "GET", "docs", `dbs/bench/colls/items/docs/i${i}`, date));
  }
  writeFileSync(sigfile, lines.join("\n") + "\n");
}

function percentile(sorted, p) {
  if (sorted.length === 0) return 0;
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))];
}

async function run(endpoint, key, op, seconds, concurrency) {
  const client = new CosmosClient({ endpoint, key });
  const container = client.database("bench").container("items");
  await container.read();                      // the SDK's caches, warm
  let unique = 0;
  const calls = {
    read: () => {
      const i = Math.floor(Math.random() * ITEMS);
      return container.item(`i${i}`, `p${i % PARTITIONS}`).read();
    },
    create: () => {
      const id = `w${process.pid}-${unique++}`;
      return container.items.create(doc(id, `p${unique % PARTITIONS}`));
    },
    query: () => {
      const pk = `p${Math.floor(Math.random() * PARTITIONS)}`;
      return container.items.query({ query: "SELECT * FROM c WHERE c.pk = @pk",
        parameters: [{ name: "@pk", value: pk }] }, { partitionKey: pk }).fetchAll();
    },
  };
  const call = calls[op];
  const lat = [];
  let errors = 0;
  const end = performance.now() + seconds * 1000;
  const start = performance.now();
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (performance.now() < end) {
      const t = performance.now();
      try {
        const r = await call();
        if (op === "read" && r.statusCode !== 200) errors++;
        if (op === "query" && r.resources.length < ITEMS / PARTITIONS) errors++;
      } catch {
        errors++;
      }
      lat.push(performance.now() - t);
    }
  }));
  const elapsed = (performance.now() - start) / 1000;
  lat.sort((a, b) => a - b);
  console.log(`RESULT requests=${lat.length} seconds=${elapsed.toFixed(2)} `
    + `rps=${(lat.length / elapsed).toFixed(1)} p50=${percentile(lat, 50).toFixed(2)} `
    + `p99=${percentile(lat, 99).toFixed(2)} errors=${errors}`);
}

const [cmd, endpoint, key, ...rest] = process.argv.slice(2);
if (cmd === "prepare") await prepare(endpoint, key, rest[0]);
else if (cmd === "run") await run(endpoint, key, rest[0], Number(rest[1]), Number(rest[2]));
else {
  console.error("usage: bench.mjs prepare ENDPOINT KEY SIGFILE | run ENDPOINT KEY OP SECONDS CONCURRENCY");
  process.exit(2);
}
