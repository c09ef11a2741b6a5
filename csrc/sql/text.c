/*
** text.c: the text pipeline of full-text search (text.h): tokens, case
** folding, stopwords, Snowball stems, edit distances, BM25.
**
** Stemming is libstemmer's (Debian's libstemmer0d, the Snowball project's
** algorithms): "english" for en-US, and German, Spanish, French, Italian
** and Portuguese for the other languages of the policy.  The English
** stopwords are the published list of Cosmos DB's analyzer (the stopwords
** page of its documentation), kept sorted for a binary search.
*/

#include <math.h>
#include <pthread.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include <libstemmer.h>

#include "sql/text.h"

static const struct { const char *name, *algo; } langs[RG_LANG_COUNT] = {
  { "en-US", "english" }, { "de-DE", "german" }, { "es-ES", "spanish" },
  { "fr-FR", "french" }, { "it-IT", "italian" }, { "pt-PT", "portuguese" },
  { "pt-BR", "portuguese" }
};

int rg_text_lang (const char *name, size_t n) {
  int i;
  for (i = 0; i < RG_LANG_COUNT; i++)
    if (strlen(langs[i].name) == n && strncasecmp(langs[i].name, name, n) == 0)
      return i;
  return -1;
}

/* Sorted in byte order (LC_ALL=C sort). */
static const char *const en_stop[] = {
  "0", "1", "2", "3", "4", "5", "6", "7", "8", "9", "a", "a's", "able",
  "about", "above", "according", "accordingly", "across", "actually", "after",
  "afterwards", "again", "against", "ain't", "all", "allow", "allows",
  "almost", "alone", "along", "already", "also", "although", "always", "am",
  "among", "amongst", "an", "and", "another", "any", "anybody", "anyhow",
  "anyone", "anything", "anyway", "anyways", "anywhere", "apart", "appear",
  "appreciate", "appropriate", "are", "aren't", "around", "as", "aside",
  "ask", "asking", "associated", "at", "available", "away", "awfully", "b",
  "be", "became", "because", "become", "becomes", "becoming", "been",
  "before", "beforehand", "behind", "being", "believe", "below", "beside",
  "besides", "best", "better", "between", "beyond", "both", "brief", "but",
  "by", "c", "c'mon", "c's", "came", "can", "can't", "cannot", "cant",
  "cause", "causes", "certain", "certainly", "changes", "clearly", "co",
  "com", "come", "comes", "concerning", "consequently", "consider",
  "considering", "contain", "containing", "contains", "corresponding",
  "could", "couldn't", "course", "currently", "d", "definitely", "described",
  "despite", "did", "didn't", "different", "do", "does", "doesn't", "doing",
  "don", "don't", "done", "down", "downwards", "during", "e", "each", "edu",
  "eg", "eight", "either", "else", "elsewhere", "enough", "entirely",
  "especially", "et", "etc", "even", "ever", "every", "everybody", "everyone",
  "everything", "everywhere", "ex", "exactly", "example", "except", "f",
  "far", "few", "fifth", "first", "five", "followed", "following", "follows",
  "for", "former", "formerly", "forth", "four", "from", "further",
  "furthermore", "g", "get", "gets", "getting", "given", "gives", "go",
  "goes", "going", "gone", "got", "gotten", "greetings", "h", "had", "hadn't",
  "happens", "hardly", "has", "hasn't", "have", "haven't", "having", "he",
  "he's", "hello", "help", "hence", "her", "here", "here's", "hereafter",
  "hereby", "herein", "hereupon", "hers", "herself", "hi", "him", "himself",
  "his", "hither", "hopefully", "how", "howbeit", "however", "i", "i'd",
  "i'll", "i'm", "i've", "ie", "if", "ignored", "immediate", "in", "inasmuch",
  "inc", "indeed", "indicate", "indicated", "indicates", "inner", "insofar",
  "instead", "into", "inward", "is", "isn't", "it", "it'd", "it'll", "it's",
  "its", "itself", "j", "just", "k", "keep", "keeps", "kept", "know", "known",
  "knows", "l", "last", "lately", "later", "latter", "latterly", "least",
  "less", "lest", "let", "let's", "like", "liked", "likely", "little", "ll",
  "look", "looking", "looks", "ltd", "m", "mainly", "make", "many", "may",
  "maybe", "me", "mean", "meanwhile", "merely", "might", "more", "moreover",
  "most", "mostly", "mr", "mrs", "ms", "much", "must", "my", "myself", "n",
  "name", "namely", "nd", "near", "nearly", "necessary", "need", "needs",
  "neither", "never", "nevertheless", "new", "next", "nine", "no", "nobody",
  "non", "none", "noone", "nor", "normally", "not", "nothing", "novel", "now",
  "nowhere", "o", "obviously", "of", "off", "often", "oh", "ok", "okay",
  "old", "on", "once", "one", "ones", "only", "onto", "or", "other", "others",
  "otherwise", "ought", "our", "ours", "ourselves", "out", "outside", "over",
  "overall", "own", "p", "particular", "particularly", "per", "perhaps",
  "placed", "please", "plus", "possible", "presumably", "probably",
  "provides", "q", "que", "quite", "qv", "r", "rather", "rd", "re", "really",
  "reasonably", "regarding", "regardless", "regards", "relatively",
  "respectively", "right", "s", "said", "same", "saw", "say", "saying",
  "says", "second", "secondly", "see", "seeing", "seem", "seemed", "seeming",
  "seems", "seen", "self", "selves", "sensible", "sent", "serious",
  "seriously", "seven", "several", "shall", "she", "should", "shouldn't",
  "since", "six", "so", "some", "somebody", "somehow", "someone", "something",
  "sometime", "sometimes", "somewhat", "somewhere", "soon", "sorry",
  "specified", "specify", "specifying", "still", "sub", "such", "sup", "sure",
  "t", "t's", "take", "taken", "tell", "tends", "th", "than", "thank",
  "thanks", "thanx", "that", "that's", "thats", "the", "their", "theirs",
  "them", "themselves", "then", "thence", "there", "there's", "thereafter",
  "thereby", "therefore", "therein", "theres", "thereupon", "these", "they",
  "they'd", "they'll", "they're", "they've", "think", "third", "this",
  "thorough", "thoroughly", "those", "though", "three", "through",
  "throughout", "thru", "thus", "to", "together", "too", "took", "toward",
  "towards", "tried", "tries", "truly", "try", "trying", "twice", "two", "u",
  "un", "under", "unfortunately", "unless", "unlikely", "until", "unto", "up",
  "upon", "us", "use", "used", "useful", "uses", "using", "usually", "v",
  "value", "various", "ve", "very", "via", "viz", "vs", "w", "want", "wants",
  "was", "wasn't", "way", "we", "we'd", "we'll", "we're", "we've", "welcome",
  "well", "went", "were", "weren't", "what", "what's", "whatever", "when",
  "whence", "whenever", "where", "where's", "whereafter", "whereas",
  "whereby", "wherein", "whereupon", "wherever", "whether", "which", "while",
  "whither", "who", "who's", "whoever", "whole", "whom", "whose", "why",
  "will", "willing", "wish", "with", "within", "without", "won't", "wonder",
  "would", "wouldn't", "x", "y", "yes", "yet", "you", "you'd", "you'll",
  "you're", "you've", "your", "yours", "yourself", "yourselves", "z", "zero"
};

#define NSTOP (sizeof(en_stop) / sizeof(en_stop[0]))
#define STOP_SLOTS 2048              /* a power of 2, over 3x NSTOP */

/* The stopwords in an open-addressing table of their indexes + 1, made
** once per process. */
static uint16_t stop_slot[STOP_SLOTS];
static pthread_once_t stop_once = PTHREAD_ONCE_INIT;

static uint32_t stop_hash (const char *w, size_t n) {
  uint32_t h = 2166136261u;
  size_t i;
  for (i = 0; i < n; i++) h = (h ^ (unsigned char)w[i]) * 16777619u;
  return h;
}

static void stop_init (void) {
  size_t i;
  for (i = 0; i < NSTOP; i++) {
    uint32_t j = stop_hash(en_stop[i], strlen(en_stop[i])) & (STOP_SLOTS - 1);
    while (stop_slot[j]) j = (j + 1) & (STOP_SLOTS - 1);
    stop_slot[j] = (uint16_t)(i + 1);
  }
}

int rg_text_stopword (int lang, const char *w, size_t n) {
  uint32_t j;
  if (lang != RG_LANG_EN_US || n > 16) return 0;   /* the longest has 13 */
  pthread_once(&stop_once, stop_init);
  for (j = stop_hash(w, n) & (STOP_SLOTS - 1); stop_slot[j];
       j = (j + 1) & (STOP_SLOTS - 1)) {
    const char *t = en_stop[stop_slot[j] - 1];
    if (strncmp(t, w, n) == 0 && t[n] == '\0') return 1;
  }
  return 0;
}

void rg_analyzer_init (rg_analyzer *a) {
  memset(a, 0, sizeof(*a));
}

#define CACHE_SETS 4096             /* of two ways; a power of 2 */
#define CACHE_WORD 21                /* longer words are stemmed each time */

typedef struct stem_entry {
  uint8_t lang, wn, sn;              /* wn 0: empty */
  char w[CACHE_WORD], s[CACHE_WORD];
} stem_entry;

struct rg_stemcache {
  stem_entry e[CACHE_SETS][2];
  uint8_t older[CACHE_SETS];         /* the way to replace next */
};

void rg_analyzer_free (rg_analyzer *a) {
  int i;
  for (i = 0; i < RG_LANG_COUNT; i++) sb_stemmer_delete(a->sb[i]);
  free(a->cache);
  memset(a, 0, sizeof(*a));
}


/*
** {=====================================================================
** Code points
** ======================================================================
*/
/* Decodes one code point at s (n > 0 bytes): its length, and *cp (-1 for
** an invalid byte, which counts as one byte). */
static size_t utf8_next (const unsigned char *s, size_t n, long *cp) {
  unsigned c = s[0];
  size_t k, i;
  long v;
  if (c < 0x80) { *cp = c; return 1; }
  if (c >= 0xC2 && c <= 0xDF) { k = 2; v = c & 0x1F; }
  else if (c >= 0xE0 && c <= 0xEF) { k = 3; v = c & 0x0F; }
  else if (c >= 0xF0 && c <= 0xF4) { k = 4; v = c & 0x07; }
  else { *cp = -1; return 1; }
  if (k > n) { *cp = -1; return 1; }
  for (i = 1; i < k; i++) {
    if ((s[i] & 0xC0) != 0x80) { *cp = -1; return 1; }
    v = (v << 6) | (s[i] & 0x3F);
  }
  if ((k == 3 && v < 0x800) || (k == 4 && (v < 0x10000 || v > 0x10FFFF)) ||
      (v >= 0xD800 && v <= 0xDFFF)) {
    *cp = -1;
    return 1;
  }
  *cp = v;
  return k;
}

static size_t utf8_put (char *out, long cp) {
  if (cp < 0x80) { out[0] = (char)cp; return 1; }
  if (cp < 0x800) {
    out[0] = (char)(0xC0 | (cp >> 6));
    out[1] = (char)(0x80 | (cp & 0x3F));
    return 2;
  }
  if (cp < 0x10000) {
    out[0] = (char)(0xE0 | (cp >> 12));
    out[1] = (char)(0x80 | ((cp >> 6) & 0x3F));
    out[2] = (char)(0x80 | (cp & 0x3F));
    return 3;
  }
  out[0] = (char)(0xF0 | (cp >> 18));
  out[1] = (char)(0x80 | ((cp >> 12) & 0x3F));
  out[2] = (char)(0x80 | ((cp >> 6) & 0x3F));
  out[3] = (char)(0x80 | (cp & 0x3F));
  return 4;
}

/* Is cp part of a word?  ASCII letters and digits; beyond ASCII, every
** code point except the Latin-1 and general punctuation and symbols,
** spaces, and the CJK punctuation block. */
static int word_cp (long cp) {
  if (cp < 0) return 0;
  if (cp < 0x80)
    return (cp >= 'a' && cp <= 'z') || (cp >= 'A' && cp <= 'Z') ||
           (cp >= '0' && cp <= '9');
  if (cp < 0xC0) return cp == 0xAA || cp == 0xB5 || cp == 0xBA;
  if (cp == 0xD7 || cp == 0xF7) return 0;
  if (cp >= 0x2000 && cp <= 0x2BFF) return 0;   /* punctuation, symbols */
  if (cp >= 0x3000 && cp <= 0x303F) return 0;
  if (cp >= 0xFE30 && cp <= 0xFE4F) return 0;
  if (cp >= 0xFF00 && cp <= 0xFF0F) return 0;
  if (cp == 0xFEFF) return 0;
  return 1;
}

static int apostrophe (long cp) { return cp == '\'' || cp == 0x2019; }

/* Simple lower case of the scripts the policy's languages use. */
static long fold (long cp) {
  if (cp < 0x80) return cp >= 'A' && cp <= 'Z' ? cp + 32 : cp;
  if (cp >= 0xC0 && cp <= 0xDE && cp != 0xD7) return cp + 32;
  if (cp >= 0x100 && cp <= 0x17F) {
    if (cp == 0x130) return 'i';
    if (cp == 0x178) return 0xFF;
    if ((cp >= 0x139 && cp <= 0x148) || (cp >= 0x179 && cp <= 0x17E))
      return (cp & 1) ? cp + 1 : cp;
    if (cp == 0x131 || cp == 0x138 || cp == 0x149 || cp == 0x17F) return cp;
    return (cp & 1) ? cp : cp + 1;
  }
  if (cp >= 0x391 && cp <= 0x3AB && cp != 0x3A2) return cp + 32;
  if (cp >= 0x410 && cp <= 0x42F) return cp + 32;
  if (cp >= 0x400 && cp <= 0x40F) return cp + 80;
  return cp;
}
/* }===================================================================== */


/*
** {=====================================================================
** Analysis
** ======================================================================
*/
static int emit (rg_analyzer *a, int lang, int stem, const char *w,
                 size_t n, uint32_t pos, rg_text_fn fn, void *ud) {
  const sb_symbol *st;
  stem_entry *ce = NULL;
  size_t sn;
  if (n == 0 || rg_text_stopword(lang, w, n)) return 0;
  if (!stem) return fn(ud, w, n, pos);
  if (a->cache == NULL)              /* no cache: stem every word */
    a->cache = (struct rg_stemcache *)calloc(1, sizeof(struct rg_stemcache));
  if (a->cache && n <= CACHE_WORD) {
    uint32_t h = 2166136261u ^ (uint32_t)lang, set;
    size_t i;
    int way;
    for (i = 0; i < n; i++) h = (h ^ (unsigned char)w[i]) * 16777619u;
    set = h & (CACHE_SETS - 1);
    for (way = 0; way < 2; way++) {
      ce = &a->cache->e[set][way];
      if (ce->wn == n && ce->lang == lang && memcmp(ce->w, w, n) == 0) {
        a->cache->older[set] = (uint8_t)!way;
        return fn(ud, ce->s, ce->sn, pos);
      }
    }
    way = a->cache->older[set];
    ce = &a->cache->e[set][way];
    a->cache->older[set] = (uint8_t)!way;
  }
  if (a->sb[lang] == NULL) {
    a->sb[lang] = sb_stemmer_new(langs[lang].algo, NULL);
    if (a->sb[lang] == NULL) { a->oom = 1; return -1; }
  }
  st = sb_stemmer_stem(a->sb[lang], (const sb_symbol *)w, (int)n);
  if (st == NULL) { a->oom = 1; return -1; }
  sn = (size_t)sb_stemmer_length(a->sb[lang]);
  if (ce && sn <= CACHE_WORD) {
    ce->lang = (uint8_t)lang;
    ce->wn = (uint8_t)n;
    ce->sn = (uint8_t)sn;
    memcpy(ce->w, w, n);
    memcpy(ce->s, st, sn);
  }
  return fn(ud, (const char *)st, sn, pos);
}

int rg_text_analyze (rg_analyzer *a, int lang, int stem, const char *s,
                     size_t n, rg_text_fn fn, void *ud) {
  const unsigned char *p = (const unsigned char *)s;
  char w[RG_TEXT_MAX_TOKEN + 4];
  size_t i = 0, wn = 0;
  uint32_t pos = 0;
  int in = 0, over = 0, r;
  if (lang < 0 || lang >= RG_LANG_COUNT) lang = RG_LANG_EN_US;
  while (i < n) {
    long cp;
    size_t k;
    if (p[i] < 0x80) {               /* ASCII, most text: no decoding */
      unsigned c = p[i];
      if ((c | 32) - 'a' < 26 || c - '0' < 10) {
        if (wn + 1 > RG_TEXT_MAX_TOKEN) over = 1;
        else w[wn++] = (char)(c - 'A' < 26 ? c + 32 : c);
        in = 1;
        i++;
        continue;
      }
      cp = (long)c;
      k = 1;
    }
    else k = utf8_next(p + i, n - i, &cp);
    if (word_cp(cp)) {
      char b[4];
      size_t bl = utf8_put(b, fold(cp));
      if (wn + bl > RG_TEXT_MAX_TOKEN) over = 1;
      else { memcpy(w + wn, b, bl); wn += bl; }
      in = 1;
      i += k;
      continue;
    }
    if (in && apostrophe(cp) && i + k < n) {   /* inside a word? */
      long nx;
      utf8_next(p + i + k, n - i - k, &nx);
      if (word_cp(nx)) {
        if (wn + 1 > RG_TEXT_MAX_TOKEN) over = 1;
        else w[wn++] = '\'';
        i += k;
        continue;
      }
    }
    if (in) {
      if (!over && (r = emit(a, lang, stem, w, wn, pos, fn, ud))) return r;
      if (++pos >= RG_TEXT_MAX_TOKENS) return 0;
    }
    in = over = 0;
    wn = 0;
    i += k;
  }
  if (in && !over) return emit(a, lang, stem, w, wn, pos, fn, ud);
  return 0;
}
/* }===================================================================== */


/*
** {=====================================================================
** Edit distance, BM25
** ======================================================================
*/
#define EDIT_MAX_CP (RG_TEXT_MAX_TOKEN + 1)

static int decode_all (const char *s, size_t n, long *out) {
  size_t i = 0;
  int m = 0;
  while (i < n && m < EDIT_MAX_CP) {
    i += utf8_next((const unsigned char *)s + i, n - i, &out[m]);
    m++;
  }
  return m;
}

int rg_text_edits (const char *a, size_t an, const char *b, size_t bn,
                   int max) {
  long x[EDIT_MAX_CP], y[EDIT_MAX_CP];
  int row[3][EDIT_MAX_CP + 1];
  int n = decode_all(a, an, x), m = decode_all(b, bn, y), i, j;
  int *pp = row[0], *pr = row[1], *cu = row[2];
  if (abs(n - m) > max) return max + 1;
  for (j = 0; j <= m; j++) pr[j] = j;
  for (i = 1; i <= n; i++) {
    int best;
    cu[0] = best = i;
    for (j = 1; j <= m; j++) {
      int c = pr[j - 1] + (x[i - 1] != y[j - 1]);
      if (pr[j] + 1 < c) c = pr[j] + 1;
      if (cu[j - 1] + 1 < c) c = cu[j - 1] + 1;
      if (i > 1 && j > 1 && x[i - 1] == y[j - 2] && x[i - 2] == y[j - 1] &&
          pp[j - 2] + 1 < c)
        c = pp[j - 2] + 1;
      cu[j] = c;
      if (c < best) best = c;
    }
    if (best > max) return max + 1;
    { int *t = pp; pp = pr; pr = cu; cu = t; }
  }
  return pr[m] > max ? max + 1 : pr[m];
}

double rg_bm25_idf (uint64_t docs, uint64_t df) {
  double N = (double)docs, f = (double)df;
  if (f > N) f = N;
  return log(1.0 + (N - f + 0.5) / (f + 0.5));
}

double rg_bm25_term (double idf, uint32_t tf, uint32_t dl, double avgdl) {
  double t = (double)tf, norm;
  if (tf == 0) return 0;
  if (avgdl <= 0) avgdl = dl > 0 ? dl : 1;
  norm = RG_BM25_K1 * (1.0 - RG_BM25_B + RG_BM25_B * (double)dl / avgdl);
  return idf * t * (RG_BM25_K1 + 1.0) / (t + norm);
}
/* }===================================================================== */
