/* Unit-test support: a temporary file holding some text. */
#ifndef KILN_TESTS_TEXT_FILE_H
#define KILN_TESTS_TEXT_FILE_H

/* A file holding `text`, named through /proc/self/fd (a tmpfile(), gone when
 * the test process exits). Up to 16 stay open at once; the 17th call closes
 * the first. The returned path is valid until then. */
const char *text_file(const char *text);

#endif
