/* escape.sh: prints the effective uid; made setuid root by the battery,
 * it must gain nothing inside the sandbox (no_new_privs, nosuid). */
#include <stdio.h>
#include <unistd.h>

int main(void)
{
    printf("%d\n", (int)geteuid());
    return 0;
}
