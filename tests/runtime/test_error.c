/* test_error.c - the error-message formatter (error.c): one line, at most the 512-byte buffer,
 * and a message cut there ends between two UTF-8 characters (names quoted in messages are
 * UTF-8: a name map's, a tensor's), whatever the alignment of the cut. */
#include "json_min.h"
#include "rt_internal.h"
#include "rt_test.h"

int main(void) {
    cannl_error err;
    char text[1200];
    for (int lead = 1; lead <= 4; lead++) {       /* a character of 1, 2, 3 and 4 bytes */
        static const char *const chars[] = {"a", "\xC3\xA9", "\xE4\xB8\xAD", "\xF0\x9F\x99\x82"};
        for (int pad = 0; pad < 4; pad++) {       /* every place of the cut in it */
            size_t n = 0;
            for (int k = 0; k < pad; k++) text[n++] = 'x';
            while (n + 4 < sizeof text) {
                memcpy(text + n, chars[lead - 1], (size_t)lead);
                n += (size_t)lead;
            }
            text[n] = '\0';
            for (int with_path = 0; with_path < 2; with_path++) {
                CHECK(cannl__fail(&err, CANNL_E_FORMAT, with_path ? "m.map" : NULL, "'%s'\nx", text) ==
                      CANNL_E_FORMAT);
                const size_t len = strlen(err.msg);
                CHECK(len < sizeof err.msg && len + 4 > sizeof err.msg - 1);
                CHECK(cannl__utf8_invalid_at(err.msg, len) == len);
                CHECK(strchr(err.msg, '\n') == NULL);
            }
        }
    }
    /* Short messages are whole: "PATH: message", newlines made spaces. */
    cannl__fail(&err, CANNL_E_IO, "f.txt", "caf\xC3\xA9\nau lait %d", 2);
    CHECK(strcmp(err.msg, "f.txt: caf\xC3\xA9 au lait 2") == 0);
    return rt_finish("test_error");
}
