/*
** lmdb_poke: damages a database on purpose, for the specs of db:verify().
**
**   lmdb_poke DIR TABLE del-first        delete the table's first entry
**   lmdb_poke DIR TABLE del-last [N]     delete its last entry (or the Nth
**                                        from the end)
**   lmdb_poke DIR TABLE dup-first        copy the first entry under a key
**                                        one byte longer (a stray entry)
**   lmdb_poke DIR TABLE garble-first     overwrite the first entry's value
**                                        past its item header (5 bytes, or
**                                        13 with an expiry) with bytes that
**                                        are not JSON
**   lmdb_poke DIR TABLE drop             remove the whole table (a database
**                                        made before the table existed)
**   lmdb_poke DIR TABLE hold SECONDS     hold a read transaction open (a
**                                        reader slot) for SECONDS, saying
**                                        "ready" on stdout once it does
**   lmdb_poke DIR KEY put-main           put KEY (its own value) into the
**                                        main tree, the file made when DIR
**                                        has none: another program's file
*/

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include <lmdb.h>

int main (int argc, char **argv) {
  MDB_env *env;
  MDB_txn *txn;
  MDB_dbi dbi;
  MDB_cursor *cur;
  MDB_val k, v;
  int rc;
  if (argc != 4 && argc != 5) {
    fprintf(stderr, "usage: lmdb_poke DIR TABLE del-first|del-last|dup-first\n");
    return 2;
  }
  if ((rc = mdb_env_create(&env)) || (rc = mdb_env_set_maxdbs(env, 16)) ||
      (rc = mdb_env_set_mapsize(env, (size_t)1 << 30)) ||
      (rc = mdb_env_open(env, argv[1], MDB_NOTLS, 0644)))
    goto fail;
  if (strcmp(argv[3], "hold") == 0) {
    if ((rc = mdb_txn_begin(env, NULL, MDB_RDONLY, &txn))) goto fail;
    printf("ready\n");
    fflush(stdout);
    sleep(argc == 5 ? (unsigned)atoi(argv[4]) : 1);
    mdb_txn_abort(txn);
    mdb_env_close(env);
    return 0;
  }
  if (strcmp(argv[3], "put-main") == 0) {
    k.mv_data = argv[2];
    k.mv_size = strlen(argv[2]);
    if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) ||
        (rc = mdb_dbi_open(txn, NULL, 0, &dbi)) ||
        (rc = mdb_put(txn, dbi, &k, &k, 0)) || (rc = mdb_txn_commit(txn)))
      goto fail;
    mdb_env_close(env);
    return 0;
  }
  if ((rc = mdb_txn_begin(env, NULL, 0, &txn)) ||
      (rc = mdb_dbi_open(txn, argv[2], 0, &dbi)))
    goto fail;
  if (strcmp(argv[3], "drop") == 0) {
    if ((rc = mdb_drop(txn, dbi, 1)) || (rc = mdb_txn_commit(txn))) goto fail;
    mdb_env_close(env);
    return 0;
  }
  if ((rc = mdb_cursor_open(txn, dbi, &cur))) goto fail;
  rc = mdb_cursor_get(cur, &k, &v, strcmp(argv[3], "del-last") == 0 ?
                      MDB_LAST : MDB_FIRST);
  if (rc == 0 && argc == 5) {
    long back = atol(argv[4]);
    while (rc == 0 && --back > 0) rc = mdb_cursor_get(cur, &k, &v, MDB_PREV);
  }
  if (rc) goto fail;
  if (strcmp(argv[3], "dup-first") == 0) {
    char key[600];
    MDB_val k2;
    memcpy(key, k.mv_data, k.mv_size);
    key[k.mv_size] = 0x7f;
    k2.mv_data = key;
    k2.mv_size = k.mv_size + 1;
    rc = mdb_put(txn, dbi, &k2, &v, 0);
  }
  else if (strcmp(argv[3], "garble-first") == 0) {
    char *val = malloc(v.mv_size);
    size_t head = v.mv_size && (((const unsigned char *)v.mv_data)[0] & 1) ? 13 : 5;
    MDB_val v2;
    if (val == NULL || v.mv_size <= head) { free(val); rc = EINVAL; goto fail; }
    memcpy(val, v.mv_data, head);
    memset(val + head, '~', v.mv_size - head);
    v2.mv_data = val;
    v2.mv_size = v.mv_size;
    rc = mdb_cursor_put(cur, &k, &v2, MDB_CURRENT);
    free(val);
  }
  else rc = mdb_cursor_del(cur, 0);
  if (rc) goto fail;
  mdb_cursor_close(cur);
  if ((rc = mdb_txn_commit(txn))) goto fail;
  mdb_env_close(env);
  return 0;
fail:
  fprintf(stderr, "lmdb_poke: %s\n", mdb_strerror(rc));
  return 1;
}
