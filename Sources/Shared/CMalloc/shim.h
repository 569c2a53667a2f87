/* glibc's malloc tuning (mallopt), which the Glibc module leaves out: `ServiceMain` bounds what
 * freed memory a service keeps. */
#include <malloc.h>
