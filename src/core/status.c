/* status.c — status strings, the thread-local last error, internal asserts. */
#include "internal.h"

#include <stdio.h>

static const char *const status_text[] = {
#define JAG_X_TEXT(name, text) text,
    JAG_STATUS_LIST(JAG_X_TEXT)
#undef JAG_X_TEXT
};

const char *jag_status_str(jag_status s) {
    if ((int)s < 0 || s >= JAG_STATUS_COUNT) return "unknown status";
    return status_text[s];
}

static _Thread_local char last_message[1024];
static _Thread_local jag_status last_status = JAG_OK;

const char *jag_last_error(void) { return last_message; }
jag_status jag_last_status(void) { return last_status; }

void jag_clear_error(void) {
    last_message[0] = '\0';
    last_status = JAG_OK;
}

jag_status jag__error(jag_status status, const char *fmt, ...) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(last_message, sizeof last_message, fmt, ap);
    va_end(ap);
    last_status = status;
    return status;
}

_Noreturn void jag__assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "jag: internal error: %s (%s:%d)\n", cond, file, line);
    abort();
}
