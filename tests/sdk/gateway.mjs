// Starts a gateway of its own for a test file (tools/gateway/gateway.sh with
// a fresh prefix and a free port) and stops it afterwards.
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { createServer } from "node:net";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { createHmac } from "node:crypto";
import { CosmosClient } from "@azure/cosmos";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const SCRIPT = join(ROOT, "tools", "gateway", "gateway.sh");

async function freePort() {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.unref();
    s.on("error", reject);
    s.listen(0, "127.0.0.1", () => {
      const { port } = s.address();
      s.close(() => resolve(port));
    });
  });
}

// Starts a gateway; returns {endpoint, key, prefix, client(), stop()}.
export async function startGateway({ workers = 2, sync = "lazy", tls = false } = {}) {
  const prefix = mkdtempSync(join(tmpdir(), "regolith-gateway-"));
  const port = await freePort();
  const env = {
    ...process.env, GATEWAY_PREFIX: prefix, GATEWAY_PORT: String(port),
    GATEWAY_WORKERS: String(workers), GATEWAY_SYNC: sync, QUIET: "1",
    TLS: tls ? "1" : "0",
  };
  const out = execFileSync("sh", [SCRIPT, "start"], { env, encoding: "utf8" });
  const [endpoint, key] = out.trim().split("\n");
  const gw = {
    endpoint, key, prefix,
    client(options = {}) {
      return new CosmosClient({ endpoint, key, ...options });
    },
    // Stops the gateway; fails when its log holds an error (a Lua error
    // in a handler, a worker that crashed).
    stop() {
      execFileSync("sh", [SCRIPT, "stop"], { env, encoding: "utf8" });
      const log = gw.errorLog();
      rmSync(prefix, { recursive: true, force: true });
      const bad = log.split("\n").filter((l) => /\[(error|crit|alert|emerg)\]/.test(l));
      if (bad.length) throw new Error("errors in the gateway's log:\n" + bad.join("\n"));
    },
    errorLog() {
      return execFileSync("cat", [join(prefix, "logs", "error.log")], { encoding: "utf8" });
    },
    // A raw request signed as the SDKs sign (or with `key` given).
    // `signLink` replaces the signed link (a RID-addressed path is signed
    // with its last RID, lower-cased, as the SDKs sign it).
    async raw(method, path, { body, headers = {}, signKey = key, date, signLink } = {}) {
      const segs = path.split("/").filter((s) => s !== "").map(decodeURIComponent);
      let type = "", link = "";
      if (segs.length % 2 === 0 && segs.length > 0) {
        type = segs[segs.length - 2]; link = segs.join("/");
      } else if (segs.length > 0) {
        type = segs[segs.length - 1]; link = segs.slice(0, -1).join("/");
      }
      if (signLink !== undefined) link = signLink;
      const d = date ?? new Date().toUTCString();
      const text = `${method.toLowerCase()}\n${type.toLowerCase()}\n${link}\n${d.toLowerCase()}\n\n`;
      const sig = createHmac("sha256", Buffer.from(signKey, "base64")).update(text).digest("base64");
      const res = await fetch(endpoint.replace(/\/$/, "") + path, {
        method,
        headers: {
          "x-ms-date": d, "x-ms-version": "2020-07-15",
          authorization: encodeURIComponent(`type=master&ver=1.0&sig=${sig}`),
          ...(body !== undefined ? { "content-type": "application/json" } : {}),
          ...headers,
        },
        body: body === undefined ? undefined : typeof body === "string" ? body : JSON.stringify(body),
      });
      const textBody = await res.text();
      let json;
      try { json = textBody ? JSON.parse(textBody) : undefined; } catch { json = undefined; }
      return { status: res.status, headers: res.headers, body: json, text: textBody };
    },
  };
  return gw;
}

// Asserts that `promise` rejects with a Cosmos error of `code` (and
// returns the error).
export async function rejects(assert, promise, code, substring) {
  try {
    await promise;
  } catch (err) {
    assert.equal(err.code, code, `expected ${code}, got ${err.code}: ${err.message}`);
    if (substring) assert.match(err.message, new RegExp(substring));
    return err;
  }
  assert.fail(`expected a ${code} failure`);
}
