/*
** token.c: continuation tokens (queries and the change feed).
**
** A token is opaque to users and never trusted: it is
**
**     base64url( u8 version | u8 kind | payload | u64 mac )
**
** where mac = SipHash-2-4 keyed with the database's secret (16 random
** bytes written when the database was created: store/layout.c) over the
** kind, a 64-bit context and the payload.  The context names what the token
** continues (a container, a query's text and parameters, a feed's options),
** so a token altered, cut short, made for another query or container or
** taken from another database fails the check and is refused with 400.
** The encoding is canonical (unpadded, the unused bits of a short last
** group zero): the one text rg_token_make wrote is the only one accepted.
*/

#include <string.h>

#include "base/token.h"

#define TOKEN_VERSION 1

static const char b64[] =
  "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_";

static uint64_t mac (const uint8_t secret[16], int kind, uint64_t ctx,
                     const uint8_t *p, size_t n) {
  rg_buf b;
  uint8_t head[9];
  uint64_t m;
  rg_buf_init(&b);
  head[0] = (uint8_t)kind;
  rg_put_u64(head + 1, ctx);
  rg_buf_add(&b, head, 9);
  rg_buf_add(&b, p, n);
  m = rg_siphash(secret, b.p ? b.p : "", b.n);
  rg_buf_free(&b);
  return m;
}

void rg_token_make (const uint8_t secret[16], int kind, uint64_t ctx,
                    const void *payload, size_t n, rg_buf *out) {
  rg_buf raw;
  uint8_t m[8];
  size_t i;
  rg_buf_init(&raw);
  rg_buf_addc(&raw, TOKEN_VERSION);
  rg_buf_addc(&raw, kind);
  rg_buf_add(&raw, payload, n);
  rg_put_u64(m, mac(secret, kind, ctx, (const uint8_t *)payload, n));
  rg_buf_add(&raw, m, 8);
  for (i = 0; !raw.oom && i < raw.n; i += 3) {
    const uint8_t *s = (const uint8_t *)raw.p + i;
    uint32_t v = (uint32_t)s[0] << 16;
    size_t left = raw.n - i;
    if (left > 1) v |= (uint32_t)s[1] << 8;
    if (left > 2) v |= s[2];
    rg_buf_addc(out, b64[(v >> 18) & 63]);
    rg_buf_addc(out, b64[(v >> 12) & 63]);
    if (left > 1) rg_buf_addc(out, b64[(v >> 6) & 63]);
    if (left > 2) rg_buf_addc(out, b64[v & 63]);
  }
  if (raw.oom) out->oom = 1;
  rg_buf_free(&raw);
}

static int unb64 (int c) {
  if (c >= 'A' && c <= 'Z') return c - 'A';
  if (c >= 'a' && c <= 'z') return c - 'a' + 26;
  if (c >= '0' && c <= '9') return c - '0' + 52;
  if (c == '-') return 62;
  if (c == '_') return 63;
  return -1;
}

int rg_token_open (const uint8_t secret[16], int kind, uint64_t ctx,
                   const char *tok, size_t n, rg_buf *payload, rg_err *e) {
  rg_buf raw;
  size_t i;
  int rc = 0;
  rg_buf_init(&raw);
  if (n % 4 == 1) goto bad;
  for (i = 0; i < n; i += 4) {
    uint32_t v = 0;
    size_t k, left = n - i < 4 ? n - i : 4;
    for (k = 0; k < 4; k++) {
      int d = k < left ? unb64((unsigned char)tok[i + k]) : 0;
      if (d < 0) goto bad;
      v = (v << 6) | (uint32_t)d;
    }
    /* a short last group leaves bits no byte uses: they must be zero, or
    ** other texts than the one made would decode to the same token */
    if ((left == 2 && (v & 0xFFFF)) || (left == 3 && (v & 0xFF))) goto bad;
    rg_buf_addc(&raw, (int)(v >> 16) & 255);
    if (left > 2) rg_buf_addc(&raw, (int)(v >> 8) & 255);
    if (left > 3) rg_buf_addc(&raw, (int)v & 255);
  }
  if (raw.oom) { rg_buf_free(&raw); return rg_fail(e, 500, "out of memory"); }
  if (raw.n < 10 || (uint8_t)raw.p[0] != TOKEN_VERSION ||
      (uint8_t)raw.p[1] != (uint8_t)kind)
    goto bad;
  {
    const uint8_t *p = (const uint8_t *)raw.p + 2;
    size_t pn = raw.n - 10;
    if (secret && rg_get_u64(p + pn) != mac(secret, kind, ctx, p, pn))
      goto bad;
    payload->n = 0;
    rg_buf_add(payload, p, pn);
  }
  rg_buf_free(&raw);
  return rc;
bad:
  rg_buf_free(&raw);
  return rg_fail(e, 400, "invalid continuation token (altered, truncated, or "
                 "made for another query or database)");
}
