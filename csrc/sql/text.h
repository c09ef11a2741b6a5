/*
** text.h: the text pipeline of full-text search: languages, tokens,
** stopwords, stems, edit distances, and the BM25 formula.
**
** One pipeline turns text into terms, for documents and queries alike, so
** that what a document is indexed under and what a query looks for can
** never differ:
**
**   1. tokens: maximal runs of word characters (letters and digits of any
**      script; an apostrophe between two of them stays inside the word,
**      as in "don't"; U+2019 counts as one);
**   2. lower case: ASCII, Latin-1, Latin Extended-A, Greek and Cyrillic
**      capitals are folded to their small letters;
**   3. stopwords: en-US drops the words of Cosmos DB's published list
**      (the other languages keep every word, as Cosmos does);
**   4. stems: the language's Snowball stemmer (libstemmer).
**
** A token keeps its position (its ordinal among every token of the text,
** stopwords counted), so that a phrase matches only where its words stand
** at the same distances as in the query.  Tokens longer than
** RG_TEXT_MAX_TOKEN bytes are dropped whole (they are not words), and a
** text yields at most RG_TEXT_MAX_TOKENS tokens.
**
** Invariants: the pipeline is a pure function of (language, text); the
** analyzer only caches stemmers, which are not thread-safe, so an analyzer
** belongs to one thread at a time.  Nothing here allocates except the
** analyzer's stemmers and its scratch.
*/

#ifndef rg_text_h
#define rg_text_h

#include <stddef.h>
#include <stdint.h>

#include "base/support.h"

#define RG_TEXT_MAX_TOKEN   64        /* bytes of one token, after folding */
#define RG_TEXT_MAX_TOKENS  1000000   /* tokens of one text */

/* The languages of Cosmos DB's full-text policy.  0 is en-US, the default
** wherever no policy names one. */
enum { RG_LANG_EN_US, RG_LANG_DE_DE, RG_LANG_ES_ES, RG_LANG_FR_FR,
       RG_LANG_IT_IT, RG_LANG_PT_PT, RG_LANG_PT_BR, RG_LANG_COUNT };

/* The language a name means ("en-US", any case), or -1. */
int  rg_text_lang (const char *name, size_t n);

/* Is the folded word a stopword of the language? */
int  rg_text_stopword (int lang, const char *w, size_t n);

/* An analyzer: stemmers made on first use, and a cache of the last stems
** (direct-mapped by a hash of language and word: most words of a text are
** the few frequent ones of its language). */
struct rg_stemcache;
typedef struct rg_analyzer {
  struct sb_stemmer *sb[RG_LANG_COUNT];
  struct rg_stemcache *cache;
  int oom;
} rg_analyzer;

void rg_analyzer_init (rg_analyzer *a);
void rg_analyzer_free (rg_analyzer *a);

/* Called for each term of a text: its bytes (valid during the call only)
** and its position.  Nonzero stops the analysis with that value. */
typedef int (*rg_text_fn) (void *ud, const char *term, size_t n,
                           uint32_t pos);

/* Runs the pipeline over n bytes of UTF-8 (invalid bytes separate words)
** in `lang`; `stem` 0 leaves words unstemmed (after stopwords).  0, the
** callback's nonzero value, or -1 when a stemmer could not be made (out
** of memory). */
int  rg_text_analyze (rg_analyzer *a, int lang, int stem, const char *s,
                      size_t n, rg_text_fn fn, void *ud);

/* The optimal-string-alignment distance (insertions, deletions,
** substitutions, transpositions of adjacent characters) between two UTF-8
** words, counted in code points; max + 1 as soon as it exceeds max. */
int  rg_text_edits (const char *a, size_t an, const char *b, size_t bn,
                    int max);

/*
** BM25 with k1 = 1.2 and b = 0.75, and the idf that never goes below zero:
** idf = ln(1 + (N - df + 0.5) / (df + 0.5)).  `docs` N counts the
** documents holding text at the path, `tokens` their terms, so that the
** average length is tokens / docs.
*/
#define RG_BM25_K1 1.2
#define RG_BM25_B  0.75
double rg_bm25_idf (uint64_t docs, uint64_t df);
double rg_bm25_term (double idf, uint32_t tf, uint32_t dl, double avgdl);

/* Reciprocal rank fusion's constant: a document at rank r (1-based) of a
** component gets weight / (RG_RRF_K + r). */
#define RG_RRF_K 60.0

#endif
