// The blog's V3 model (examples/blog/v3.lua) written against
// @azure/cosmos and run through the gateway: its answers to the article's
// requests must be the Lua model's, item for item and charge for charge.
//
// The data set, the Lua scripts and the Lua model's answers come from
// tests/sdk/blog_model.lua; the JavaScript side loads the same data through
// the same requests (C1-C4, the procedures given a post's comments or
// likes at once), runs its processors on the change feed (pull model),
// then plays the same scenario.
import { test, before, after } from "node:test";
import assert from "node:assert/strict";
import { execFileSync } from "node:child_process";
import { mkdtempSync, rmSync } from "node:fs";
import { tmpdir } from "node:os";
import { join, dirname } from "node:path";
import { fileURLToPath } from "node:url";
import { ChangeFeedStartFrom } from "@azure/cosmos";
import { startGateway } from "./gateway.mjs";

const ROOT = join(dirname(fileURLToPath(import.meta.url)), "..", "..");
const SCALE = process.env.BLOG_SCALE ?? "0.0001";

function lua(...args) {
  const env = { ...process.env, LUA_PATH: "lua/?.lua;lua/?/init.lua;examples/?.lua;;",
    LUA_CPATH: "build/lua5.4/?.so;;" };
  const out = execFileSync("lua5.4", ["tests/sdk/blog_model.lua", ...args],
    { cwd: ROOT, env, encoding: "utf8", maxBuffer: 1 << 30 });
  return JSON.parse(out);
}

// V3 over the SDK: the model's containers, scripts, requests, processors.
class V3 {
  static SHORT = 100;

  constructor(db) { this.db = db; }

  async open(sources) {
    const composite = { indexingMode: "consistent", includedPaths: [{ path: "/*" }],
      compositeIndexes: [[{ path: "/type", order: "ascending" },
        { path: "/creationDate", order: "descending" }]] };
    this.users = (await this.db.containers.create({ id: "users",
      partitionKey: { paths: ["/userId"] } })).container;
    this.posts = (await this.db.containers.create({ id: "posts",
      partitionKey: { paths: ["/postId"] } })).container;
    this.feed = (await this.db.containers.create({ id: "feed",
      partitionKey: { paths: ["/type"] }, indexingPolicy: composite })).container;
    for (const id of ["createComment", "createLike", "updateUsernames"]) {
      await this.posts.scripts.storedProcedures.create({ id, body: sources[id] });
    }
    await this.feed.scripts.triggers.create({ id: "truncateFeed", triggerType: "Post",
      triggerOperation: "All", body: sources.truncateFeed });
    this.processors = [
      { iterator: this.users.items.getChangeFeedIterator({
          changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 1000 }),
        handle: (user) => this.carryUsername(user) },
      { iterator: this.posts.items.getChangeFeedIterator({
          changeFeedStartFrom: ChangeFeedStartFrom.Beginning(), maxItemCount: 1000 }),
        handle: (post) => this.copy(post) },
    ];
  }

  static left(s, n) { return [...s].slice(0, n).join(""); }

  static shortPost(p) {
    return { id: p.postId, type: "post", postId: p.postId, userId: p.userId,
      userUsername: p.userUsername, title: p.title, content: V3.left(p.content, V3.SHORT),
      commentCount: p.commentCount, likeCount: p.likeCount, creationDate: p.creationDate };
  }

  // The processors: usernames into every item that carries another, and
  // short copies of posts into `users` and `feed`.
  async carryUsername(user) {
    if (user.type !== "user") return;
    const { resources: pids } = await this.posts.items.query({
      query: "SELECT DISTINCT VALUE p.postId FROM p WHERE p.userId = @userId AND p.userUsername != @username",
      parameters: [{ name: "@userId", value: user.id }, { name: "@username", value: user.username }],
    }).fetchAll();
    for (const pid of pids) {
      await this.posts.scripts.storedProcedure("updateUsernames").execute(pid, [user.id, user.username]);
    }
  }

  async copy(post) {
    if (post.type !== "post") return;
    const short = V3.shortPost(post);
    await this.users.items.upsert(short);
    await this.feed.items.upsert(short, { postTriggerInclude: ["truncateFeed"] });
  }

  async pump() {
    for (;;) {
      let seen = 0;
      for (const p of this.processors) {
        for (;;) {
          const res = await p.iterator.readNext();
          if (res.statusCode === 304) break;
          for (const item of res.result) await p.handle(item);
          seen += res.result.length;
        }
      }
      if (seen === 0) return;
    }
  }

  static postItem(p) {
    return { id: p.id, type: "post", postId: p.id, userId: p.userId, userUsername: p.username,
      title: p.title, content: p.content, commentCount: 0, likeCount: 0, creationDate: p.creationDate };
  }

  static commentItem(c) {
    return { id: c.id, type: "comment", postId: c.postId, userId: c.userId,
      userUsername: c.username, content: c.content, creationDate: c.creationDate };
  }

  static likeItem(l) {
    return { id: l.id, type: "like", postId: l.postId, userId: l.userId,
      userUsername: l.username, creationDate: l.creationDate };
  }

  // The requests: [result, charge].
  async C1(u) {
    const r = await this.users.items.upsert({ id: u.id, type: "user", userId: u.id, username: u.username });
    return [r.resource, r.requestCharge];
  }
  async C2(p) {
    const r = await this.posts.items.create(V3.postItem(p));
    return [r.resource, r.requestCharge];
  }
  async C3(c) {
    const r = await this.posts.scripts.storedProcedure("createComment")
      .execute(c.postId, [c.postId, V3.commentItem(c)]);
    return [r.resource, r.requestCharge];
  }
  async C4(l) {
    const r = await this.posts.scripts.storedProcedure("createLike")
      .execute(l.postId, [l.postId, V3.likeItem(l)]);
    return [r.resource, r.requestCharge];
  }
  async Q1(id) {
    const r = await this.users.item(id, id).read();
    return [r.resource, r.requestCharge];
  }
  async Q2(pid) {
    const r = await this.posts.item(pid, pid).read();
    return [r.resource, r.requestCharge];
  }
  async query(c, query, parameters = []) {
    const r = await c.items.query({ query, parameters }).fetchAll();
    return [r.resources, r.requestCharge];
  }
  Q3(userId) {
    return this.query(this.users, "SELECT * FROM u WHERE u.userId = @userId AND u.type = 'post' "
      + "ORDER BY u.creationDate DESC", [{ name: "@userId", value: userId }]);
  }
  Q4(pid) {
    return this.query(this.posts, "SELECT * FROM p WHERE p.postId = @postId AND p.type = 'comment'",
      [{ name: "@postId", value: pid }]);
  }
  Q5(pid) {
    return this.query(this.posts, "SELECT * FROM p WHERE p.postId = @postId AND p.type = 'like'",
      [{ name: "@postId", value: pid }]);
  }
  Q6() {
    return this.query(this.feed, "SELECT TOP 100 * FROM f WHERE f.type = 'post' AND "
      + "IS_STRING(f.creationDate) ORDER BY f.creationDate DESC");
  }

  // The load, as blog.load does it.
  async load(data) {
    for (const u of data.users) await this.C1(u);
    for (const { post, comments, likes } of data.posts) {
      await this.posts.items.create(V3.postItem(post));
      if (comments.length) {
        await this.posts.scripts.storedProcedure("createComment")
          .execute(post.id, [post.id, comments.map(V3.commentItem)]);
      }
      if (likes.length) {
        await this.posts.scripts.storedProcedure("createLike")
          .execute(post.id, [post.id, likes.map(V3.likeItem)]);
      }
    }
    await this.pump();
  }
}

// A document without its system properties; lists of documents in id order
// when the request does not order them (Q4, Q5).
function plain(v, sort) {
  if (Array.isArray(v)) {
    const out = v.map((x) => plain(x));
    if (sort) out.sort((a, b) => (a.id < b.id ? -1 : a.id > b.id ? 1 : 0));
    return out;
  }
  if (v && typeof v === "object") {
    const out = {};
    for (const k of Object.keys(v).sort()) if (!k.startsWith("_")) out[k] = v[k];
    return out;
  }
  return v;
}

let gw, dir;
before(async () => {
  gw = await startGateway({ sync: "none" });
  dir = mkdtempSync(join(tmpdir(), "regolith-blog-"));
});
after(() => {
  gw.stop();
  rmSync(dir, { recursive: true, force: true });
});

test("the blog's V3 through the JavaScript SDK answers as the Lua model does", async () => {
  const data = lua("data", SCALE);
  const expected = lua("answers", SCALE, join(dir, "lua"));
  const client = gw.client();
  const { database } = await client.databases.create({ id: "blog" });
  const v3 = new V3(database);
  await v3.open(lua("scripts"));
  await v3.load(data);
  assert.equal(data.scenario.length, expected.length);
  for (const [k, [req, arg]] of data.scenario.entries()) {
    const [result, charge] = await v3[req](arg);
    await v3.pump();
    const want = expected[k];
    const sort = req === "Q4" || req === "Q5";
    assert.deepEqual(plain(result, sort), plain(want.result, sort), `${req} ${JSON.stringify(arg)}`);
    // Charges are the same, but for the index entry of _ts: a write that
    // replaces an item rewrites it only when the second changed since the
    // item's last write, which depends on how fast each side ran.
    const slack = req === "C1" || req === "C3" || req === "C4" ? 0.4 : 0;
    assert.ok(Math.abs(charge - want.charge) <= slack + 1e-9,
      `${req} ${JSON.stringify(arg)}: charged ${charge}, the Lua model ${want.charge}`);
  }
  // the feed holds the 100 newest posts, the new one first
  const [newest] = await v3.Q6();
  assert.equal(newest.length, 100);
  assert.equal(newest[0].id, "p-new");
  assert.equal(newest[0].commentCount, 1);
  // the rename reached every copy of the user's posts
  const [mine] = await v3.Q3("u1");
  assert.ok(mine.length > 0 && mine.every((p) => p.userUsername === "renamed-1"));
});
