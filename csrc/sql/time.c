/*
** time.c: the date and time functions of the query dialect.
**
** A date and time is a UTC string, "YYYY-MM-DDThh:mm:ss.fffffffZ" as the
** functions print it; as input the forms the reference accepts: the date
** alone, optionally followed by Z, or the date, 'T' or a space, hh:mm:ss,
** optionally a '.' and 1 to 7 digits of fraction, optionally Z.  Internally
** a point in time is a count of ticks (100 ns) since 0001-01-01T00:00:00,
** the proleptic Gregorian calendar, years 1 to 9999; ticks and timestamps
** the functions take or give count from the Unix epoch (1970-01-01), in
** 100 ns and in milliseconds.
**
** Parts ("yyyy", "month", "mi", ...) are named as the reference lists
** them, in any case.  DateTimeDiff counts the boundaries of the part
** crossed between the two points, not whole intervals.  Anything invalid
** gives undefined.
*/

#include <math.h>
#include <stdio.h>
#include <string.h>
#include <time.h>

#include "sql/sql_int.h"

#define TICKS_PER_DAY  864000000000LL
#define MAX_TICKS      3155378975999999999LL   /* 9999-12-31T23:59:59.9999999 */

enum { P_YEAR, P_MONTH, P_DAY, P_HOUR, P_MINUTE, P_SECOND, P_MS, P_MCS,
       P_NS };

static const int64_t unit_ticks[] = {
  0, 0, TICKS_PER_DAY, 36000000000LL, 600000000LL, 10000000LL, 10000LL,
  10LL, 0
};


/*
** {=====================================================================
** Calendar
** ======================================================================
*/
/* Days from 0001-01-01 to y-m-d (valid). */
static int64_t days_from_civil (int64_t y, int m, int d) {
  int64_t era, yoe, doy, doe;
  y -= m <= 2;
  era = (y >= 0 ? y : y - 399) / 400;
  yoe = y - era * 400;
  doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468 + 719162;   /* from 1970, then 0001 */
}

static void civil_from_days (int64_t z, int *y, int *m, int *d) {
  int64_t era, doe, yoe, doy, mp, yy;
  z -= 719162;                       /* days from 1970-01-01 */
  z += 719468;
  era = (z >= 0 ? z : z - 146096) / 146097;
  doe = z - era * 146097;
  yoe = (doe - doe / 1460 + doe / 36524 - doe / 146096) / 365;
  yy = yoe + era * 400;
  doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
  mp = (5 * doy + 2) / 153;
  *d = (int)(doy - (153 * mp + 2) / 5 + 1);
  *m = (int)(mp < 10 ? mp + 3 : mp - 9);
  *y = (int)(yy + (*m <= 2));
}

static int leap (int y) {
  return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0;
}

static int month_days (int y, int m) {
  static const int md[] = { 31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31 };
  return m == 2 && leap(y) ? 29 : md[m - 1];
}

typedef struct dt {
  int y, mo, d, h, mi, s;
  int64_t frac;                      /* ticks within the second */
} dt;

static void split (int64_t ticks, dt *t) {
  int64_t days = ticks / TICKS_PER_DAY, rest = ticks % TICKS_PER_DAY;
  civil_from_days(days, &t->y, &t->mo, &t->d);
  t->h = (int)(rest / 36000000000LL);
  rest %= 36000000000LL;
  t->mi = (int)(rest / 600000000LL);
  rest %= 600000000LL;
  t->s = (int)(rest / 10000000LL);
  t->frac = rest % 10000000LL;
}

/* Ticks of a valid broken-down time; -1 when it is not valid. */
static int64_t join (const dt *t) {
  if (t->y < 1 || t->y > 9999 || t->mo < 1 || t->mo > 12 || t->d < 1 ||
      t->d > month_days(t->y, t->mo) || t->h < 0 || t->h > 23 ||
      t->mi < 0 || t->mi > 59 || t->s < 0 || t->s > 59 || t->frac < 0 ||
      t->frac > 9999999)
    return -1;
  return days_from_civil(t->y, t->mo, t->d) * TICKS_PER_DAY +
         t->h * 36000000000LL + t->mi * 600000000LL + t->s * 10000000LL +
         t->frac;
}

static int digits (const char *s, size_t n, size_t at, int k, int *out) {
  int i, v = 0;
  if (at + (size_t)k > n) return 0;
  for (i = 0; i < k; i++) {
    char c = s[at + (size_t)i];
    if (c < '0' || c > '9') return 0;
    v = v * 10 + (c - '0');
  }
  *out = v;
  return 1;
}

int rg_dt_parse (const char *s, size_t n, int64_t *ticks) {
  dt t;
  size_t i = 10;
  memset(&t, 0, sizeof(t));
  if (!digits(s, n, 0, 4, &t.y) || n < 10 || s[4] != '-' ||
      !digits(s, n, 5, 2, &t.mo) || s[7] != '-' || !digits(s, n, 8, 2, &t.d))
    return 0;
  if (i < n && s[i] == 'Z' && i + 1 == n) i++;
  else if (i < n) {
    if (s[i] != 'T' && s[i] != ' ') return 0;
    if (!digits(s, n, i + 1, 2, &t.h) || i + 3 >= n || s[i + 3] != ':' ||
        !digits(s, n, i + 4, 2, &t.mi) || i + 6 >= n || s[i + 6] != ':' ||
        !digits(s, n, i + 7, 2, &t.s))
      return 0;
    i += 9;
    if (i < n && s[i] == '.') {
      int k = 0;
      int64_t f = 0;
      i++;
      while (i < n && s[i] >= '0' && s[i] <= '9' && k < 7) {
        f = f * 10 + (s[i] - '0');
        i++;
        k++;
      }
      if (k == 0 || (i < n && s[i] >= '0' && s[i] <= '9')) return 0;
      while (k++ < 7) f *= 10;
      t.frac = f;
    }
    if (i < n && s[i] == 'Z') i++;
  }
  if (i != n) return 0;
  *ticks = join(&t);
  return *ticks >= 0;
}

/* Prints ticks as the 28-character form; 0 when out of range. */
static int dt_format (int64_t ticks, char out[29]) {
  dt t;
  int i;
  int64_t f;
  if (ticks < 0 || ticks > MAX_TICKS) return 0;
  split(ticks, &t);
  out[0] = (char)('0' + t.y / 1000);
  out[1] = (char)('0' + t.y / 100 % 10);
  out[2] = (char)('0' + t.y / 10 % 10);
  out[3] = (char)('0' + t.y % 10);
  out[4] = '-';
  out[5] = (char)('0' + t.mo / 10);
  out[6] = (char)('0' + t.mo % 10);
  out[7] = '-';
  out[8] = (char)('0' + t.d / 10);
  out[9] = (char)('0' + t.d % 10);
  out[10] = 'T';
  out[11] = (char)('0' + t.h / 10);
  out[12] = (char)('0' + t.h % 10);
  out[13] = ':';
  out[14] = (char)('0' + t.mi / 10);
  out[15] = (char)('0' + t.mi % 10);
  out[16] = ':';
  out[17] = (char)('0' + t.s / 10);
  out[18] = (char)('0' + t.s % 10);
  out[19] = '.';
  for (i = 26, f = t.frac; i >= 20; i--, f /= 10) out[i] = (char)('0' + f % 10);
  out[27] = 'Z';
  out[28] = '\0';
  return 1;
}

int64_t rg_dt_now_ticks (void) {
  struct timespec ts;
  clock_gettime(CLOCK_REALTIME, &ts);
  return RG_UNIX_EPOCH_TICKS + (int64_t)ts.tv_sec * RG_TICKS_PER_SEC +
         ts.tv_nsec / 100;
}
/* }===================================================================== */


/*
** {=====================================================================
** The functions
** ======================================================================
*/
static int part_of (const rg_qv *v) {
  static const struct { const char *name; int part; } names[] = {
    {"year", P_YEAR}, {"yyyy", P_YEAR}, {"yy", P_YEAR},
    {"month", P_MONTH}, {"mm", P_MONTH}, {"m", P_MONTH},
    {"day", P_DAY}, {"dd", P_DAY}, {"d", P_DAY},
    {"hour", P_HOUR}, {"hh", P_HOUR},
    {"minute", P_MINUTE}, {"mi", P_MINUTE}, {"n", P_MINUTE},
    {"second", P_SECOND}, {"ss", P_SECOND}, {"s", P_SECOND},
    {"millisecond", P_MS}, {"ms", P_MS},
    {"microsecond", P_MCS}, {"mcs", P_MCS},
    {"nanosecond", P_NS}, {"ns", P_NS}, {NULL, 0}
  };
  int i;
  size_t k;
  if (v->t != RG_QV_STR || v->n > 11) return -1;
  for (i = 0; names[i].name; i++) {
    if (strlen(names[i].name) != v->n) continue;
    for (k = 0; k < v->n; k++) {
      char c = v->s[k];
      if (c >= 'A' && c <= 'Z') c = (char)(c + 32);
      if (c != names[i].name[k]) break;
    }
    if (k == v->n) return names[i].part;
  }
  return -1;
}

static int dt_arg (const rg_qv *v, int64_t *ticks) {
  return v->t == RG_QV_STR && rg_dt_parse(v->s, v->n, ticks);
}

static int int_arg (const rg_qv *v, int64_t *out) {
  if (v->t != RG_QV_NUM || floor(v->d) != v->d || fabs(v->d) > 9.2e18)
    return 0;
  *out = (int64_t)v->d;
  return 1;
}

static void set_dt (rg_qctx *x, int64_t ticks, rg_qv *out) {
  char buf[29], *s;
  if (!dt_format(ticks, buf)) return;
  if ((s = rg_arena_dup(x->scratch, buf, 28)) == NULL) return;
  rg_qv_str(out, s, 28);
}

/* ticks + n parts; -1 when out of range. */
static int64_t add (int64_t ticks, int part, int64_t n) {
  if (part == P_YEAR || part == P_MONTH) {
    dt t;
    int64_t months;
    split(ticks, &t);
    if (n > 120000 || n < -120000) return -1;
    months = (int64_t)t.y * 12 + (t.mo - 1) + (part == P_YEAR ? n * 12 : n);
    if (months < 12 || months >= 120000) return -1;
    t.y = (int)(months / 12);
    t.mo = (int)(months % 12) + 1;
    if (t.d > month_days(t.y, t.mo)) t.d = month_days(t.y, t.mo);
    return join(&t);
  }
  {
    double r = (double)ticks + (part == P_NS ? (double)(n / 100)
                                             : (double)n * (double)unit_ticks[part]);
    if (r < 0 || r > (double)MAX_TICKS) return -1;
    return part == P_NS ? ticks + n / 100 : ticks + n * unit_ticks[part];
  }
}

static int64_t floordiv (int64_t a, int64_t b) {
  int64_t q = a / b;
  if ((a % b != 0) && ((a < 0) != (b < 0))) q--;
  return q;
}

static void format (rg_qctx *x, int64_t ticks, const rg_qv *f, rg_qv *out) {
  rg_buf b;
  dt t;
  size_t i = 0;
  char *s;
  split(ticks, &t);
  rg_buf_init(&b);
  while (i < f->n) {
    char c = f->s[i];
    size_t run = 1;
    while (i + run < f->n && f->s[i + run] == c) run++;
    switch (c) {
      case 'y':
        if (run >= 4) rg_buf_addf(&b, "%04d", t.y);
        else if (run == 2) rg_buf_addf(&b, "%02d", t.y % 100);
        else rg_buf_addf(&b, "%d", t.y % 100);
        break;
      case 'M': rg_buf_addf(&b, run >= 2 ? "%02d" : "%d", t.mo); break;
      case 'd': rg_buf_addf(&b, run >= 2 ? "%02d" : "%d", t.d); break;
      case 'H': rg_buf_addf(&b, run >= 2 ? "%02d" : "%d", t.h); break;
      case 'h': {
        int h = t.h % 12 == 0 ? 12 : t.h % 12;
        rg_buf_addf(&b, run >= 2 ? "%02d" : "%d", h);
        break;
      }
      case 'm': rg_buf_addf(&b, run >= 2 ? "%02d" : "%d", t.mi); break;
      case 's': rg_buf_addf(&b, run >= 2 ? "%02d" : "%d", t.s); break;
      case 'f': case 'F': {          /* F: without trailing zeros */
        char fr[8];
        size_t k = run > 7 ? 7 : run;
        snprintf(fr, sizeof(fr), "%07lld", (long long)t.frac);
        if (c == 'F') while (k > 0 && fr[k - 1] == '0') k--;
        rg_buf_add(&b, fr, k);
        break;
      }
      case 't': rg_buf_adds(&b, t.h < 12 ? (run >= 2 ? "AM" : "A")
                                         : (run >= 2 ? "PM" : "P"));
        break;
      case '\'': case '"': {
        size_t j = i + 1;
        while (j < f->n && f->s[j] != c) j++;
        rg_buf_add(&b, f->s + i + 1, j - i - 1);
        run = j < f->n ? j - i + 1 : j - i;
        break;
      }
      case '\\':
        if (i + 1 < f->n) rg_buf_addc(&b, f->s[i + 1]);
        run = 2;
        break;
      default: rg_buf_add(&b, f->s + i, run);
    }
    i += run;
  }
  if (!b.oom && (s = rg_arena_dup(x->scratch, b.p ? b.p : "", b.n)) != NULL)
    rg_qv_str(out, s, b.n);
  rg_buf_free(&b);
}

void rg_qtime_call (rg_qctx *x, int fn, const rg_qv *a, int n, rg_qv *out) {
  int64_t t, u, k;
  int part;
  dt d;
  switch (fn) {
    case RG_QF_GETCURRENTDATETIME:
      set_dt(x, rg_dt_now_ticks(), out);
      return;
    case RG_QF_NOW:                  /* NOW(), or NOW(part, n): n parts on */
      if (n == 0) { set_dt(x, rg_dt_now_ticks(), out); return; }
      if ((part = part_of(&a[0])) < 0 || !int_arg(&a[1], &k)) return;
      if ((t = add(rg_dt_now_ticks(), part, k)) >= 0) set_dt(x, t, out);
      return;
    case RG_QF_GETCURRENTDATETIMESTATIC: set_dt(x, x->now_ticks, out); return;
    case RG_QF_GETCURRENTTICKS:
      rg_qv_num(out, (double)(rg_dt_now_ticks() - RG_UNIX_EPOCH_TICKS));
      return;
    case RG_QF_GETCURRENTTICKSSTATIC:
      rg_qv_num(out, (double)(x->now_ticks - RG_UNIX_EPOCH_TICKS));
      return;
    case RG_QF_GETCURRENTTIMESTAMP:
      rg_qv_num(out, (double)((rg_dt_now_ticks() - RG_UNIX_EPOCH_TICKS) /
                              10000));
      return;
    case RG_QF_GETCURRENTTIMESTAMPSTATIC:
      rg_qv_num(out, (double)((x->now_ticks - RG_UNIX_EPOCH_TICKS) / 10000));
      return;
    case RG_QF_AGO:
      if ((part = part_of(&a[0])) < 0 || !int_arg(&a[1], &k)) return;
      if ((t = add(rg_dt_now_ticks(), part, -k)) >= 0) set_dt(x, t, out);
      return;
    case RG_QF_DATETIMEADD:
      if ((part = part_of(&a[0])) < 0 || !int_arg(&a[1], &k) ||
          !dt_arg(&a[2], &t))
        return;
      if ((t = add(t, part, k)) >= 0) set_dt(x, t, out);
      return;
    case RG_QF_DATETIMEPART:
      if ((part = part_of(&a[0])) < 0 || !dt_arg(&a[1], &t)) return;
      split(t, &d);
      switch (part) {
        case P_YEAR: rg_qv_num(out, d.y); break;
        case P_MONTH: rg_qv_num(out, d.mo); break;
        case P_DAY: rg_qv_num(out, d.d); break;
        case P_HOUR: rg_qv_num(out, d.h); break;
        case P_MINUTE: rg_qv_num(out, d.mi); break;
        case P_SECOND: rg_qv_num(out, d.s); break;
        case P_MS: rg_qv_num(out, (double)(d.frac / 10000)); break;
        case P_MCS: rg_qv_num(out, (double)(d.frac / 10)); break;
        default: rg_qv_num(out, (double)(d.frac * 100)); break;
      }
      return;
    case RG_QF_YEAR: case RG_QF_MONTH: case RG_QF_DAY:
      if (!dt_arg(&a[0], &t)) return;
      split(t, &d);
      rg_qv_num(out, fn == RG_QF_YEAR ? d.y : fn == RG_QF_MONTH ? d.mo : d.d);
      return;
    case RG_QF_DATETIMEDIFF:
      if ((part = part_of(&a[0])) < 0 || !dt_arg(&a[1], &t) ||
          !dt_arg(&a[2], &u))
        return;
      if (part == P_YEAR || part == P_MONTH) {
        dt e;
        split(t, &d);
        split(u, &e);
        if (part == P_YEAR) rg_qv_num(out, e.y - d.y);
        else rg_qv_num(out, (e.y * 12 + e.mo) - (d.y * 12 + d.mo));
      }
      else if (part == P_NS) rg_qv_num(out, (double)(u - t) * 100);
      else
        rg_qv_num(out, (double)(floordiv(u, unit_ticks[part]) -
                                floordiv(t, unit_ticks[part])));
      return;
    case RG_QF_DATETIMEBIN: {
      int64_t size = 1, origin = RG_UNIX_EPOCH_TICKS, unit;
      if (!dt_arg(&a[0], &t) || (part = part_of(&a[1])) < P_DAY) return;
      if (n > 2 && a[2].t != RG_QV_UNDEF &&
          (!int_arg(&a[2], &size) || size <= 0))
        return;
      if (n > 3 && !dt_arg(&a[3], &origin)) return;
      if (origin < days_from_civil(1601, 1, 1) * TICKS_PER_DAY) return;
      if (part == P_NS) {
        if (size % 100) return;
        unit = size / 100;
      }
      else {
        if (size > 9.2e18 / (double)unit_ticks[part]) return;
        unit = size * unit_ticks[part];
      }
      set_dt(x, origin + floordiv(t - origin, unit) * unit, out);
      return;
    }
    case RG_QF_DATETIMEFROMPARTS: {
      int64_t v[7] = { 0, 0, 0, 0, 0, 0, 0 };
      int i;
      for (i = 0; i < n; i++)
        if (!int_arg(&a[i], &v[i]) || v[i] < 0 || v[i] > 99999999) return;
      d.y = (int)v[0];
      d.mo = (int)v[1];
      d.d = (int)v[2];
      d.h = (int)v[3];
      d.mi = (int)v[4];
      d.s = (int)v[5];
      d.frac = v[6];
      if ((t = join(&d)) >= 0) set_dt(x, t, out);
      return;
    }
    case RG_QF_DATETIMEFORMAT:
      if (!dt_arg(&a[0], &t) || a[1].t != RG_QV_STR) return;
      format(x, t, &a[1], out);
      return;
    case RG_QF_DATETIMETOTICKS:
      if (dt_arg(&a[0], &t))
        rg_qv_num(out, (double)(t - RG_UNIX_EPOCH_TICKS));
      return;
    case RG_QF_DATETIMETOTIMESTAMP:
      if (dt_arg(&a[0], &t))
        rg_qv_num(out, (double)floordiv(t - RG_UNIX_EPOCH_TICKS, 10000));
      return;
    case RG_QF_TICKSTODATETIME: case RG_QF_TIMESTAMPTODATETIME: {
      double v;
      if (a[0].t != RG_QV_NUM) return;
      v = trunc(a[0].d) * (fn == RG_QF_TIMESTAMPTODATETIME ? 10000.0 : 1.0);
      if (v < -(double)RG_UNIX_EPOCH_TICKS ||
          v > (double)(MAX_TICKS - RG_UNIX_EPOCH_TICKS))
        return;
      set_dt(x, (int64_t)v + RG_UNIX_EPOCH_TICKS, out);
      return;
    }
    default: return;
  }
}
/* }===================================================================== */
