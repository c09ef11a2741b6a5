"""The anchors of the vector search benchmark: hnswlib and FAISS (Debian's
python3-hnswlib and python3-faiss) on the files search_data wrote, one
query per call, one thread, timed in CPU time (as search_c and search.lua
are: the least sensitive to a shared machine's load).

Usage: /usr/bin/python3 examples/bench/search_anchor.py DIR [K]
Prints one JSON object per line (the same fields as search_c).
"""

import json
import sys
import time

import numpy as np


def main():
    d = sys.argv[1]
    k = int(sys.argv[2]) if len(sys.argv) > 2 else 10
    meta = json.load(open(d + "/meta.json"))
    n, q, dim = meta["n"], meta["q"], meta["dim"]
    base = np.fromfile(d + "/base.f32", dtype="<f4").reshape(n, dim)
    query = np.fromfile(d + "/query.f32", dtype="<f4").reshape(q, dim)
    truth = np.fromfile(d + "/truth.u32", dtype="<u4").reshape(q, 100)[:, :k]

    def recall(found):
        return sum(len(set(f[:k]) & set(t)) for f, t in zip(found, truth)) / (q * k)

    def out(**kw):
        print(json.dumps(kw), flush=True)

    import faiss
    faiss.omp_set_num_threads(1)
    flat = faiss.IndexFlatL2(dim)
    flat.add(base)
    t = time.process_time()
    found = [flat.search(query[i:i + 1], k)[1][0] for i in range(q)]
    t = time.process_time() - t
    out(test="faiss flat", recall=round(recall(found), 4), qps=round(q / t))

    import hnswlib
    index = hnswlib.Index(space="l2", dim=dim)
    index.init_index(max_elements=n, M=16, ef_construction=200, random_seed=42)
    index.set_num_threads(1)
    t = time.process_time()
    index.add_items(base, np.arange(n))
    t = time.process_time() - t
    out(test="hnswlib build", vectors=n, seconds=round(t, 2),
        per_second=round(n / t), M=16, ef_construction=200)
    for ef in (10, 20, 40, 80):
        index.set_ef(max(ef, k))
        t = time.process_time()
        found = [index.knn_query(query[i:i + 1], k=k)[0][0] for i in range(q)]
        t = time.process_time() - t
        out(test="hnswlib", ef=ef, recall=round(recall(found), 4),
            qps=round(q / t))

    # Filtered: the items whose number modulo 100 is below keep % (as
    # search_c filters them).  This hnswlib has no filter in its search, so
    # a program asks for k / (the fraction kept) items and keeps those that
    # pass, asking for twice as many while fewer than k pass.
    ids = np.arange(n)
    for keep in (1, 10, 50):
        passing = ids[ids % 100 < keep]
        sub = faiss.IndexFlatL2(dim)
        sub.add(base[passing])
        ftruth = passing[sub.search(query, k)[1]]
        t = time.process_time()
        found = []
        for i in range(q):
            ask = min(n, -(-k * 100 // keep))
            while True:
                index.set_ef(ask)
                got = index.knn_query(query[i:i + 1], k=ask)[0][0]
                got = got[got % 100 < keep][:k]
                if len(got) >= k or ask == n:
                    break
                ask = min(n, 2 * ask)
            found.append(got)
        t = time.process_time() - t
        hits = sum(len(set(f) & set(tr)) for f, tr in zip(found, ftruth))
        out(test="hnswlib filtered (post-filter)", keep=keep / 100,
            recall=round(hits / (q * k), 4), qps=round(q / t))


if __name__ == "__main__":
    main()
