/* status.c — status strings, the thread-local last error, internal asserts. */
#include "internal.h"

#include <pthread.h>
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

/* The last error's text: a buffer per thread, made at its first error and
 * freed when it exits (the thread-locals stay small: JAG_TLS). */
#define MESSAGE_BYTES 1024
static JAG_TLS char *last_message;
static JAG_TLS jag_status last_status = JAG_OK;
static pthread_key_t message_key;
static pthread_once_t message_once = PTHREAD_ONCE_INIT;

static void message_free(void *p) {
    free(p);
    last_message = NULL;
}

static void message_make_key(void) { pthread_key_create(&message_key, message_free); }

const char *jag_last_error(void) {
    if (last_message) return last_message;
    return last_status ? "(no memory was left for this error's message)" : "";
}

jag_status jag_last_status(void) { return last_status; }

void jag_clear_error(void) {
    if (last_message) last_message[0] = '\0';
    last_status = JAG_OK;
}

jag_status jag__error(jag_status status, const char *fmt, ...) {
    if (!last_message && (last_message = malloc(MESSAGE_BYTES))) {
        pthread_once(&message_once, message_make_key);
        pthread_setspecific(message_key, last_message);
    }
    if (last_message) {
        va_list ap;
        va_start(ap, fmt);
        vsnprintf(last_message, MESSAGE_BYTES, fmt, ap);
        va_end(ap);
    }
    last_status = status;
    return status;
}

_Noreturn void jag__assert_fail(const char *cond, const char *file, int line) {
    fprintf(stderr, "jag: internal error: %s (%s:%d)\n", cond, file, line);
    abort();
}
