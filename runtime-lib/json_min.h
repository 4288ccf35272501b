/* json_min.h - a tiny JSON parser and string builder (internal; used for
 * safetensors headers and the metrics log). */
#ifndef CANNL_JSON_MIN_H
#define CANNL_JSON_MIN_H

#include <stddef.h>
#include <stdint.h>

typedef enum cannl__jtype {
    CANNL__J_NULL, CANNL__J_BOOL, CANNL__J_NUM, CANNL__J_STR, CANNL__J_ARR, CANNL__J_OBJ
} cannl__jtype;

/* Nodes live in one array and refer to each other by index (-1 = none). */
typedef struct cannl__jnode {
    cannl__jtype type;
    int32_t child;       /* first element / member (arrays, objects) */
    int32_t next;        /* next sibling */
    int32_t count;       /* number of elements / members */
    const char *key;     /* member name (decoded, NUL-terminated) or NULL */
    size_t key_len;
    const char *str;     /* STR: decoded, NUL-terminated; NUM: points into the
                            source text (valid only while that text is) */
    size_t len;
    int boolean;
} cannl__jnode;

typedef struct cannl__json {
    cannl__jnode *nodes; /* nodes[0] is the root */
    int32_t n, cap;
    char *strings;       /* decoded string storage */
    size_t strings_len;
} cannl__json;

/* Parse text[0..len) (one value; surrounding whitespace allowed). Returns 0
 * on success; otherwise 1 and a description with the byte offset in why. */
int cannl__json_parse(cannl__json *j, const char *text, size_t len, char *why, size_t whycap);

void cannl__json_free(cannl__json *j);

/* A non-negative integer number node as uint64; 0 on success. */
int cannl__json_u64(const cannl__jnode *n, uint64_t *out);

/* A growable string for building JSON text. After an allocation failure
 * `oom` is set and further appends are ignored. */
typedef struct cannl__sbuf {
    char *p;
    size_t len, cap;
    int oom;
} cannl__sbuf;

void cannl__sb_free(cannl__sbuf *b);
void cannl__sb_append(cannl__sbuf *b, const char *s, size_t n);
void cannl__sb_printf(cannl__sbuf *b, const char *fmt, ...)
#if defined(__GNUC__) || defined(__clang__)
    __attribute__((format(printf, 2, 3)))
#endif
    ;
/* Append s as a quoted JSON string (", \\ and control characters escaped). */
void cannl__sb_json_string(cannl__sbuf *b, const char *s);

/* The offset of the first byte of s[0..n) that is not part of well-formed UTF-8 (RFC 3629: no
 * overlong forms, no surrogates, nothing above U+10FFFF), or n when all of it is. */
size_t cannl__utf8_invalid_at(const char *s, size_t n);

#endif /* CANNL_JSON_MIN_H */
