/*
 * pause: the sandbox process of every pod on kube-testenv's node.
 *
 * The kubelet needs a sandbox ("pause") image, and no registry can be reached
 * to pull registry.k8s.io/pause, so kube-testenv builds this one locally: a
 * static binary that sleeps until SIGTERM or SIGINT and, as PID 1 of a pod
 * with a shared PID namespace, reaps the orphans it inherits. That is all
 * Kubernetes' own pause does.
 */
#include <signal.h>
#include <stddef.h>
#include <sys/wait.h>
#include <unistd.h>

static void stop(int sig)
{
	(void)sig;
	_exit(0);
}

static void reap(int sig)
{
	(void)sig;
	while (waitpid(-1, NULL, WNOHANG) > 0) {
	}
}

int main(void)
{
	struct sigaction sa = { 0 };

	sa.sa_handler = stop;
	sigaction(SIGINT, &sa, NULL);
	sigaction(SIGTERM, &sa, NULL);
	sa.sa_handler = reap;
	sa.sa_flags = SA_NOCLDSTOP;
	sigaction(SIGCHLD, &sa, NULL);
	for (;;)
		pause();
}
