/* json_min.c - a tiny, strict JSON parser (RFC 8259) producing a flat node
 * array, and a string builder for writing JSON. Used for safetensors headers
 * and the metrics log; nesting is limited to 64, strings must be well-formed
 * UTF-8 and are decoded (escapes, \uXXXX with surrogate pairs) to UTF-8. */
#include "json_min.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

enum { MAX_DEPTH = 64 };

typedef struct parser {
    const char *s, *p, *end;
    cannl__json *j;
    char *why;
    size_t whycap;
} parser;

static int fail(parser *ps, const char *msg) {
    snprintf(ps->why, ps->whycap, "%s at byte %zu", msg, (size_t)(ps->p - ps->s));
    return -1;
}

static void ws(parser *ps) {
    while (ps->p < ps->end && (*ps->p == ' ' || *ps->p == '\t' || *ps->p == '\n' || *ps->p == '\r')) ps->p++;
}

static int32_t new_node(parser *ps, cannl__jtype t) {
    cannl__json *j = ps->j;
    if (j->n == j->cap) {
        if (j->cap > INT32_MAX / 2) return -1;
        int32_t ncap = j->cap ? j->cap * 2 : 32;
        cannl__jnode *nn = realloc(j->nodes, (size_t)ncap * sizeof *nn);
        if (!nn) return -1;
        j->nodes = nn;
        j->cap = ncap;
    }
    cannl__jnode *n = &j->nodes[j->n];
    memset(n, 0, sizeof *n);
    n->type = t;
    n->child = n->next = -1;
    return j->n++;
}

static int hex4(const char *p, unsigned *out) {
    unsigned v = 0;
    for (int i = 0; i < 4; i++) {
        char c = p[i];
        v <<= 4;
        if (c >= '0' && c <= '9') v |= (unsigned)(c - '0');
        else if (c >= 'a' && c <= 'f') v |= (unsigned)(c - 'a' + 10);
        else if (c >= 'A' && c <= 'F') v |= (unsigned)(c - 'A' + 10);
        else return -1;
    }
    *out = v;
    return 0;
}

/* Length of the well-formed UTF-8 sequence at p (n bytes available) that starts with a byte
 * >= 0x80, or 0: no overlong forms, no surrogates, nothing above U+10FFFF (RFC 3629). */
static size_t utf8_length(const unsigned char *p, size_t n) {
    const unsigned c = p[0];
    size_t len;
    unsigned lo = 0x80, hi = 0xBF; /* range of the second byte */
    if (c >= 0xC2 && c <= 0xDF) len = 2;
    else if (c >= 0xE0 && c <= 0xEF) len = 3, lo = c == 0xE0 ? 0xA0 : 0x80, hi = c == 0xED ? 0x9F : 0xBF;
    else if (c >= 0xF0 && c <= 0xF4) len = 4, lo = c == 0xF0 ? 0x90 : 0x80, hi = c == 0xF4 ? 0x8F : 0xBF;
    else return 0;
    if (n < len || p[1] < lo || p[1] > hi) return 0;
    for (size_t i = 2; i < len; i++)
        if (p[i] < 0x80 || p[i] > 0xBF) return 0;
    return len;
}

size_t cannl__utf8_invalid_at(const char *s, size_t n) {
    const unsigned char *p = (const unsigned char *)s;
    for (size_t i = 0; i < n;) {
        if (p[i] < 0x80) {
            i++;
            continue;
        }
        const size_t len = utf8_length(p + i, n - i);
        if (!len) return i;
        i += len;
    }
    return n;
}

/* Decode a string starting at the opening quote into j->strings. */
static int parse_string(parser *ps, const char **out, size_t *out_len) {
    char *dst = ps->j->strings + ps->j->strings_len, *d = dst;
    ps->p++; /* opening quote */
    for (;;) {
        if (ps->p >= ps->end) return fail(ps, "unterminated string");
        unsigned char c = (unsigned char)*ps->p;
        if (c == '"') {
            ps->p++;
            break;
        }
        if (c < 0x20) return fail(ps, "control character in string");
        if (c >= 0x80) {
            size_t len = utf8_length((const unsigned char *)ps->p, (size_t)(ps->end - ps->p));
            if (!len) return fail(ps, "invalid UTF-8 in string");
            memcpy(d, ps->p, len);
            d += len;
            ps->p += len;
            continue;
        }
        if (c != '\\') {
            *d++ = (char)c;
            ps->p++;
            continue;
        }
        if (ps->end - ps->p < 2) return fail(ps, "unterminated escape");
        char e = ps->p[1];
        ps->p += 2;
        switch (e) {
        case '"': *d++ = '"'; break;
        case '\\': *d++ = '\\'; break;
        case '/': *d++ = '/'; break;
        case 'b': *d++ = '\b'; break;
        case 'f': *d++ = '\f'; break;
        case 'n': *d++ = '\n'; break;
        case 'r': *d++ = '\r'; break;
        case 't': *d++ = '\t'; break;
        case 'u': {
            unsigned cp;
            if (ps->end - ps->p < 4 || hex4(ps->p, &cp)) return fail(ps, "bad \\u escape");
            ps->p += 4;
            if (cp >= 0xD800 && cp <= 0xDBFF) {
                unsigned lo;
                if (ps->end - ps->p < 6 || ps->p[0] != '\\' || ps->p[1] != 'u' || hex4(ps->p + 2, &lo) ||
                    lo < 0xDC00 || lo > 0xDFFF)
                    return fail(ps, "unpaired surrogate in \\u escape");
                ps->p += 6;
                cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
            } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
                return fail(ps, "unpaired surrogate in \\u escape");
            }
            if (cp < 0x80) {
                *d++ = (char)cp;
            } else if (cp < 0x800) {
                *d++ = (char)(0xC0 | (cp >> 6));
                *d++ = (char)(0x80 | (cp & 0x3F));
            } else if (cp < 0x10000) {
                *d++ = (char)(0xE0 | (cp >> 12));
                *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *d++ = (char)(0x80 | (cp & 0x3F));
            } else {
                *d++ = (char)(0xF0 | (cp >> 18));
                *d++ = (char)(0x80 | ((cp >> 12) & 0x3F));
                *d++ = (char)(0x80 | ((cp >> 6) & 0x3F));
                *d++ = (char)(0x80 | (cp & 0x3F));
            }
            break;
        }
        default: ps->p--; return fail(ps, "bad escape");
        }
    }
    /* Decoded text is never longer than the source including its quotes,
     * so the terminator fits in the space the closing quote accounted for. */
    *d = '\0';
    *out = dst;
    *out_len = (size_t)(d - dst);
    ps->j->strings_len += (size_t)(d - dst) + 1;
    return 0;
}

static int parse_number(parser *ps) {
    const char *p = ps->p;
    if (p < ps->end && *p == '-') p++;
    if (p >= ps->end) return fail(ps, "bad number");
    if (*p == '0') {
        p++;
    } else if (*p >= '1' && *p <= '9') {
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    } else {
        return fail(ps, "bad number");
    }
    if (p < ps->end && *p == '.') {
        p++;
        if (p >= ps->end || *p < '0' || *p > '9') return fail(ps, "bad number");
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    }
    if (p < ps->end && (*p == 'e' || *p == 'E')) {
        p++;
        if (p < ps->end && (*p == '+' || *p == '-')) p++;
        if (p >= ps->end || *p < '0' || *p > '9') return fail(ps, "bad number");
        while (p < ps->end && *p >= '0' && *p <= '9') p++;
    }
    ps->p = p;
    return 0;
}

static int parse_value(parser *ps, int depth, int32_t *out);

static int parse_container(parser *ps, int depth, int32_t self, int is_obj) {
    const char close = is_obj ? '}' : ']';
    ps->p++; /* '{' or '[' */
    ws(ps);
    if (ps->p < ps->end && *ps->p == close) {
        ps->p++;
        return 0;
    }
    int32_t prev = -1;
    for (;;) {
        const char *key = NULL;
        size_t key_len = 0;
        if (is_obj) {
            ws(ps);
            if (ps->p >= ps->end || *ps->p != '"') return fail(ps, "expected a member name");
            if (parse_string(ps, &key, &key_len)) return -1;
            ws(ps);
            if (ps->p >= ps->end || *ps->p != ':') return fail(ps, "expected ':'");
            ps->p++;
        }
        int32_t child;
        if (parse_value(ps, depth + 1, &child)) return -1;
        cannl__jnode *cn = &ps->j->nodes[child];
        cn->key = key;
        cn->key_len = key_len;
        if (prev < 0) ps->j->nodes[self].child = child;
        else ps->j->nodes[prev].next = child;
        prev = child;
        ps->j->nodes[self].count++;
        ws(ps);
        if (ps->p < ps->end && *ps->p == ',') {
            ps->p++;
            continue;
        }
        if (ps->p < ps->end && *ps->p == close) {
            ps->p++;
            return 0;
        }
        return fail(ps, is_obj ? "expected ',' or '}'" : "expected ',' or ']'");
    }
}

static int literal(parser *ps, const char *w) {
    size_t n = strlen(w);
    if ((size_t)(ps->end - ps->p) < n || memcmp(ps->p, w, n) != 0) return fail(ps, "unexpected character");
    ps->p += n;
    return 0;
}

static int parse_value(parser *ps, int depth, int32_t *out) {
    if (depth > MAX_DEPTH) return fail(ps, "nesting too deep");
    ws(ps);
    if (ps->p >= ps->end) return fail(ps, "unexpected end of input");
    char c = *ps->p;
    cannl__jtype t;
    switch (c) {
    case '{': t = CANNL__J_OBJ; break;
    case '[': t = CANNL__J_ARR; break;
    case '"': t = CANNL__J_STR; break;
    case 't': case 'f': t = CANNL__J_BOOL; break;
    case 'n': t = CANNL__J_NULL; break;
    default:
        if (c == '-' || (c >= '0' && c <= '9')) t = CANNL__J_NUM;
        else return fail(ps, "unexpected character");
    }
    int32_t self = new_node(ps, t);
    if (self < 0) return fail(ps, "out of memory");
    *out = self;
    switch (t) {
    case CANNL__J_OBJ: return parse_container(ps, depth, self, 1);
    case CANNL__J_ARR: return parse_container(ps, depth, self, 0);
    case CANNL__J_STR: {
        const char *s;
        size_t len;
        if (parse_string(ps, &s, &len)) return -1;
        ps->j->nodes[self].str = s;
        ps->j->nodes[self].len = len;
        return 0;
    }
    case CANNL__J_NUM: {
        const char *start = ps->p;
        if (parse_number(ps)) return -1;
        ps->j->nodes[self].str = start;
        ps->j->nodes[self].len = (size_t)(ps->p - start);
        return 0;
    }
    case CANNL__J_BOOL:
        if (c == 't') {
            ps->j->nodes[self].boolean = 1;
            return literal(ps, "true");
        }
        return literal(ps, "false");
    case CANNL__J_NULL: return literal(ps, "null");
    }
    return fail(ps, "unexpected character");
}

int cannl__json_parse(cannl__json *j, const char *text, size_t len, char *why, size_t whycap) {
    memset(j, 0, sizeof *j);
    if (whycap) why[0] = '\0';
    j->strings = malloc(len + 1);
    if (!j->strings) {
        snprintf(why, whycap, "out of memory");
        return 1;
    }
    parser ps = {text, text, text + len, j, why, whycap};
    int32_t root;
    if (parse_value(&ps, 0, &root)) {
        cannl__json_free(j);
        return 1;
    }
    ws(&ps);
    if (ps.p != ps.end) {
        fail(&ps, "unexpected data after the JSON value");
        cannl__json_free(j);
        return 1;
    }
    return 0;
}

void cannl__json_free(cannl__json *j) {
    free(j->nodes);
    free(j->strings);
    memset(j, 0, sizeof *j);
}

int cannl__json_u64(const cannl__jnode *n, uint64_t *out) {
    if (n->type != CANNL__J_NUM || n->len == 0) return 1;
    uint64_t v = 0;
    for (size_t i = 0; i < n->len; i++) {
        char c = n->str[i];
        if (c < '0' || c > '9') return 1; /* sign, fraction or exponent */
        unsigned d = (unsigned)(c - '0');
        if (v > (UINT64_MAX - d) / 10) return 1;
        v = v * 10 + d;
    }
    *out = v;
    return 0;
}

/* ------------------------------------------------------------ writing */

void cannl__sb_free(cannl__sbuf *b) {
    free(b->p);
    memset(b, 0, sizeof *b);
}

static int sb_reserve(cannl__sbuf *b, size_t extra) {
    if (b->oom) return -1;
    if (b->cap - b->len > extra) return 0;
    size_t ncap = b->cap ? b->cap : 256;
    while (ncap - b->len <= extra) {
        if (ncap > SIZE_MAX / 2) {
            b->oom = 1;
            return -1;
        }
        ncap *= 2;
    }
    char *np = realloc(b->p, ncap);
    if (!np) {
        b->oom = 1;
        return -1;
    }
    b->p = np;
    b->cap = ncap;
    return 0;
}

void cannl__sb_append(cannl__sbuf *b, const char *s, size_t n) {
    if (sb_reserve(b, n)) return;
    memcpy(b->p + b->len, s, n);
    b->len += n;
    b->p[b->len] = '\0';
}

void cannl__sb_printf(cannl__sbuf *b, const char *fmt, ...) {
    char small[128];
    va_list ap;
    va_start(ap, fmt);
    int n = vsnprintf(small, sizeof small, fmt, ap);
    va_end(ap);
    if (n < 0) {
        b->oom = 1;
        return;
    }
    if ((size_t)n < sizeof small) {
        cannl__sb_append(b, small, (size_t)n);
        return;
    }
    if (sb_reserve(b, (size_t)n)) return;
    va_start(ap, fmt);
    vsnprintf(b->p + b->len, (size_t)n + 1, fmt, ap);
    va_end(ap);
    b->len += (size_t)n;
}

void cannl__sb_json_string(cannl__sbuf *b, const char *s) {
    cannl__sb_append(b, "\"", 1);
    const char *run = s;
    for (; *s; s++) {
        unsigned char c = (unsigned char)*s;
        if (c >= 0x20 && c != '"' && c != '\\') continue;
        cannl__sb_append(b, run, (size_t)(s - run));
        switch (c) {
        case '"': cannl__sb_append(b, "\\\"", 2); break;
        case '\\': cannl__sb_append(b, "\\\\", 2); break;
        case '\n': cannl__sb_append(b, "\\n", 2); break;
        case '\r': cannl__sb_append(b, "\\r", 2); break;
        case '\t': cannl__sb_append(b, "\\t", 2); break;
        default: cannl__sb_printf(b, "\\u%04x", c); break;
        }
        run = s + 1;
    }
    cannl__sb_append(b, run, (size_t)(s - run));
    cannl__sb_append(b, "\"", 1);
}
