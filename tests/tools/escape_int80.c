/* escape.sh: getpid through the 32-bit entry point (int 0x80), which the
 * sandbox's seccomp filter must kill. Linked statically, so it runs in any
 * root the battery gives it. */
#include <stdio.h>

int main(void)
{
    long ret;
    __asm__ volatile("int $0x80" : "=a"(ret) : "a"(20L) : "memory");
    printf("int80 returned %ld\n", ret);
    return 0;
}
