/* The allocator every service links: mimalloc, which takes the place of glibc's malloc and free for
 * the whole process (linked before libc, it interposes them), with a heap per thread
 * (`ServiceMain.allocator`). */
#include <mimalloc.h>
