/* The pod sandbox's (and the test container's) process: sleep until SIGTERM/SIGINT, then exit 0.
 * Built with gcc -static into the tests' own OCI image (tests/integration/nri/image.py). */
#include <signal.h>
#include <unistd.h>
static void done(int s) { (void)s; _exit(0); }
int main(void) { signal(SIGTERM, done); signal(SIGINT, done); for (;;) pause(); }
