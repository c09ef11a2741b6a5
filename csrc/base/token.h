/*
** token.h: continuation tokens (queries and the change feed).
**
** A token is opaque to users and never trusted: its payload travels with a
** SipHash MAC keyed by a 16-byte secret of the database, over the kind, a
** 64-bit context (what the token continues: a container, a query's text
** and parameters, a feed's options) and the payload.  Invariant: a token
** altered, cut short, made for another context or by another database is
** refused with 400, and only the one text rg_token_make wrote is accepted.
*/

#ifndef rg_token_h
#define rg_token_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"

enum { RG_TOKEN_QUERY = 'q', RG_TOKEN_FEED = 'f' };

/* Appends to `out` a token carrying `payload`, keyed by `secret`, bound to
** the kind and the context. */
void rg_token_make (const uint8_t secret[16], int kind, uint64_t ctx,
                    const void *payload, size_t n, rg_buf *out);
/* Checks a token and puts its payload in `payload`; 400 when it is not a
** token made with this secret for this kind and context.  With `secret`
** NULL the payload is read unchecked: a look before the context is known,
** which never replaces the check. */
int  rg_token_open (const uint8_t secret[16], int kind, uint64_t ctx,
                    const char *tok, size_t n, rg_buf *payload, rg_err *e);

#endif
