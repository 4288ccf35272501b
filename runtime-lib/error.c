/* error.c - status names and the one-line error messages. */
#define _POSIX_C_SOURCE 200809L

#include "rt_internal.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *cannl_status_str(cannl_status s) {
    switch (s) {
    case CANNL_OK: return "ok";
    case CANNL_E_ARG: return "invalid argument";
    case CANNL_E_IO: return "i/o error";
    case CANNL_E_FORMAT: return "bad file format";
    case CANNL_E_NOMEM: return "out of memory";
    case CANNL_E_NOTFOUND: return "not found";
    case CANNL_E_MISMATCH: return "mismatch";
    case CANNL_E_RANGE: return "out of range";
    case CANNL_E_DEVICE: return "device error";
    }
    return "unknown status";
}

size_t cannl_dtype_size(cannl_dtype dtype) {
    switch (dtype) {
    case CANNL_F32: case CANNL_I32: return 4;
    case CANNL_F64: return 8;
    }
    return 0;
}

cannl_status cannl__fail(cannl_error *err, cannl_status st, const char *path, const char *fmt, ...) {
    if (!err) return st;
    size_t cap = sizeof err->msg;
    int n = 0;
    if (path) n = snprintf(err->msg, cap, "%s: ", path);
    if (n < 0) n = 0;
    if ((size_t)n >= cap) n = (int)cap - 1;
    va_list ap;
    va_start(ap, fmt);
    const int full = vsnprintf(err->msg + n, cap - (size_t)n, fmt, ap);
    va_end(ap);
    if (full >= 0 && (size_t)full >= cap - (size_t)n) {
        /* Cut where a UTF-8 character begins, not inside one (names quoted in messages are
           UTF-8): drop a last sequence that its lead byte says is longer than what is left. */
        size_t len = strlen(err->msg), lead = len;
        while (lead > 0 && len - lead < 4 && ((unsigned char)err->msg[lead - 1] & 0xC0) == 0x80) lead--;
        if (lead > 0) {
            const unsigned char c = (unsigned char)err->msg[lead - 1];
            const size_t want = c >= 0xF0 ? 4 : c >= 0xE0 ? 3 : c >= 0xC0 ? 2 : 1;
            if (c >= 0xC0 && len - (lead - 1) < want) err->msg[lead - 1] = '\0';
        }
    }
    /* Keep it one line. */
    for (char *c = err->msg; *c; c++)
        if (*c == '\n' || *c == '\r') *c = ' ';
    return st;
}

const char *cannl__strerror(int errnum, char *buf, size_t cap) {
    /* XSI strerror_r (we do not define _GNU_SOURCE). */
    if (strerror_r(errnum, buf, cap) != 0) snprintf(buf, cap, "error %d", errnum);
    return buf;
}
