"""A smoke test of the gateway with Debian's python3-azure-cosmos (the 3.x SDK).

    /usr/bin/python3 tests/sdk/python_smoke.py ENDPOINT KEY

Databases, containers, items (create, read, upsert, replace with if-match,
delete), a cross-partition and a partitioned query, the change feed, a
stored procedure in Lua, an error; then the calls the 3.x SDK's samples make
with `_self` links (RID-addressed paths): a container created under a
database's _self, items, a JavaScript procedure and an offer reached by
theirs.  Exits 0 when everything holds.
"""
import sys

import azure.cosmos.cosmos_client as cosmos_client
import azure.cosmos.errors as errors


def expect_status(status, fn, *args):
    try:
        fn(*args)
    except errors.HTTPFailure as e:
        assert e.status_code == status, "expected %d, got %d: %s" % (
            status, e.status_code, e)
        return e
    raise AssertionError("expected a %d failure" % status)


def main(endpoint, key):
    client = cosmos_client.CosmosClient(endpoint, {"masterKey": key})
    db = client.CreateDatabase({"id": "pysmoke"})
    assert db["id"] == "pysmoke" and db["_rid"]
    expect_status(409, client.CreateDatabase, {"id": "pysmoke"})
    coll = client.CreateContainer("dbs/pysmoke", {
        "id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}})
    assert coll["partitionKey"]["paths"] == ["/pk"]
    link = "dbs/pysmoke/colls/c"
    names = [c["id"] for c in client.ReadContainers("dbs/pysmoke")]
    assert names == ["c"], names

    for i in range(10):
        client.CreateItem(link, {"id": "i%d" % i, "pk": "p%d" % (i % 3), "n": i})
    item = client.ReadItem(link + "/docs/i4", {"partitionKey": "p1"})
    assert item["n"] == 4
    item["n"] = 40
    replaced = client.ReplaceItem(link + "/docs/i4", item, {
        "partitionKey": "p1",
        "accessCondition": {"type": "IfMatch", "condition": item["_etag"]}})
    assert replaced["n"] == 40
    expect_status(412, client.ReplaceItem, link + "/docs/i4", item, {
        "partitionKey": "p1",
        "accessCondition": {"type": "IfMatch", "condition": item["_etag"]}})
    client.UpsertItem(link, {"id": "u", "pk": "p0", "v": 1})
    client.UpsertItem(link, {"id": "u", "pk": "p0", "v": 2})
    assert client.ReadItem(link + "/docs/u", {"partitionKey": "p0"})["v"] == 2
    client.DeleteItem(link + "/docs/u", {"partitionKey": "p0"})
    expect_status(404, client.ReadItem, link + "/docs/u", {"partitionKey": "p0"})

    rows = list(client.QueryItems(link, "SELECT VALUE c.n FROM c ORDER BY c.n",
                                  {"enableCrossPartitionQuery": True}))
    assert rows == [0, 1, 2, 3, 5, 6, 7, 8, 9, 40], rows
    rows = list(client.QueryItems(link, {
        "query": "SELECT VALUE c.id FROM c WHERE c.n > @n",
        "parameters": [{"name": "@n", "value": 2}]}, {"partitionKey": "p2"}))
    assert sorted(rows) == ["i5", "i8"], rows
    paged = list(client.QueryItems(link, "SELECT * FROM c",
                                   {"enableCrossPartitionQuery": True,
                                    "maxItemCount": 3}))
    assert len(paged) == 10

    feed = list(client.QueryItemsChangeFeed(link, {"partitionKeyRangeId": "0",
                                                   "startFromBeginning": True}))
    assert len(feed) == 10, len(feed)

    client.CreateStoredProcedure(link, {"id": "double", "body":
        "return function(ctx, x) return { twice = x * 2, pk = ctx.partition_key } end"})
    out = client.ExecuteStoredProcedure(link + "/sprocs/double", [21],
                                        {"partitionKey": "p1"})
    assert out == {"twice": 42, "pk": "p1"}, out

    client.DeleteContainer(link)
    expect_status(404, client.ReadContainer, link)
    client.DeleteDatabase("dbs/pysmoke")

    self_links(client)
    print("python3-azure-cosmos smoke test: ok")


def self_links(client):
    """The SDK's own samples: every call after the first by a _self link."""
    db = client.CreateDatabase({"id": "pyrid"})
    coll = client.CreateContainer(db["_self"], {
        "id": "c", "partitionKey": {"paths": ["/pk"], "kind": "Hash"}},
        {"offerThroughput": 500})
    assert coll["_self"].startswith(db["_self"]), coll["_self"]
    assert client.ReadContainer(coll["_self"])["id"] == "c"
    assert [c["id"] for c in client.ReadContainers(db["_self"])] == ["c"]
    item = client.CreateItem(coll["_self"], {"id": "a", "pk": "p", "n": 1})
    read = client.ReadItem(item["_self"], {"partitionKey": "p"})
    assert read["n"] == 1 and read["_self"] == item["_self"]
    read["n"] = 2
    assert client.ReplaceItem(item["_self"], read, {"partitionKey": "p"})["n"] == 2
    rows = list(client.QueryItems(coll["_self"], "SELECT VALUE c.n FROM c",
                                  {"partitionKey": "p"}))
    assert rows == [2], rows
    sproc = client.CreateStoredProcedure(coll["_self"], {"id": "bump", "body": """
        function bump(id) {
            var coll = getContext().getCollection();
            coll.readDocument(coll.getAltLink() + "/docs/" + id, function (err, doc) {
                if (err) throw err;
                doc.n += 1;
                coll.replaceDocument(doc._self, doc, function (err, done) {
                    if (err) throw err;
                    getContext().getResponse().setBody(done.n);
                });
            });
        }"""})
    assert client.ExecuteStoredProcedure(sproc["_self"], ["a"],
                                         {"partitionKey": "p"}) == 3
    offer = list(client.QueryOffers(
        "SELECT * FROM root r WHERE r.resource = '%s'" % coll["_self"]))[0]
    assert offer["content"]["offerThroughput"] == 500, offer
    offer["content"]["offerThroughput"] = 800
    replaced = client.ReplaceOffer(offer["_self"], offer)
    assert replaced["content"]["offerThroughput"] == 800
    assert client.ReadOffer(offer["_self"])["content"]["offerThroughput"] == 800
    client.DeleteItem(item["_self"], {"partitionKey": "p"})
    expect_status(404, client.ReadItem, item["_self"], {"partitionKey": "p"})
    expect_status(404, client.ReadContainer, db["_self"] + "colls/AAAAAIAAAAA=/")
    client.DeleteContainer(coll["_self"])
    client.DeleteDatabase(db["_self"])


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
