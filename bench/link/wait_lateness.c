/* How late a timed wake-up is on this host, for the waits a link worker could use
 * (issue #15, docs/experiments.md "where a held frame's extra time goes"): an
 * absolute clock_nanosleep (what `nflab doctor`'s timer floor uses), ppoll on an
 * idle UDP socket with a relative timeout (the data plane's blocking receive), and
 * ppoll on a timerfd armed with an absolute expiry. Under the link workers'
 * conditions: pinned to the last CPU, SCHED_FIFO 50, timer slack 1 ns, SCHED_IDLE
 * spinners on every CPU; holds of HOLD_US every PERIOD_US, the three kinds
 * interleaved so they meet the same host.
 *   wait_lateness N [HOLD_US] [PERIOD_US]   (N holds of each kind) */
#define _GNU_SOURCE
#include <poll.h>
#include <pthread.h>
#include <sched.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

static long long now_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec * 1000000000LL + t.tv_nsec;
}

static struct timespec ts_of(long long ns)
{
	struct timespec t = { ns / 1000000000LL, ns % 1000000000LL };
	return t;
}

/* Keeps a CPU from halting without taking it from anyone (SCHED_IDLE). */
static void *spin(void *arg)
{
	cpu_set_t s;
	struct sched_param p = { 0 };
	CPU_ZERO(&s);
	CPU_SET((long)arg, &s);
	pthread_setaffinity_np(pthread_self(), sizeof s, &s);
	sched_setscheduler(0, SCHED_IDLE, &p);
	for (;;)
		;
	return NULL;
}

static int cmp(const void *a, const void *b)
{
	long long x = *(const long long *)a, y = *(const long long *)b;
	return x < y ? -1 : x > y;
}

int main(int argc, char **argv)
{
	int n = argc > 1 ? atoi(argv[1]) : 3000;
	long long hold = (argc > 2 ? atoll(argv[2]) : 3910) * 1000LL;
	long long period = (argc > 3 ? atoll(argv[3]) : 8750) * 1000LL;
	long cpus = sysconf(_SC_NPROCESSORS_ONLN);
	const char *name[3] = { "clock_nanosleep_abs", "ppoll_socket_rel", "ppoll_timerfd_abs" };
	long long *late[3];
	struct sched_param fifo = { 50 };
	cpu_set_t s;
	pthread_t t;
	int udp = socket(AF_INET, SOCK_DGRAM, 0);
	int tfd = timerfd_create(CLOCK_MONOTONIC, 0);

	if (n <= 0 || hold <= 0 || period < 2 * hold) {
		fprintf(stderr, "usage: wait_lateness N [HOLD_US] [PERIOD_US] (N > 0, PERIOD_US >= 2 * HOLD_US)\n");
		return 2;
	}
	for (long c = 0; c < cpus; c++)
		pthread_create(&t, NULL, spin, (void *)c);
	CPU_ZERO(&s);
	CPU_SET(cpus - 1, &s);
	sched_setaffinity(0, sizeof s, &s);
	if (sched_setscheduler(0, SCHED_FIFO, &fifo))
		perror("SCHED_FIFO (run as root)");
	prctl(PR_SET_TIMERSLACK, 1);
	for (int k = 0; k < 3; k++)
		late[k] = malloc(sizeof(long long) * n);

	long long start = now_ns() + 10000000LL;
	for (int i = 0; i < 3 * n; i++) {
		struct timespec w = ts_of(start + i * period);
		clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &w, NULL);
		long long due = now_ns() + hold;
		int kind = i % 3;
		if (kind == 0) {
			struct timespec d = ts_of(due);
			clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &d, NULL);
		} else if (kind == 1) {
			struct timespec rel = ts_of(due - now_ns());
			struct pollfd pf = { udp, POLLIN, 0 };
			ppoll(&pf, 1, &rel, NULL);
		} else {
			struct itimerspec it = { { 0, 0 }, ts_of(due) };
			struct pollfd pf = { tfd, POLLIN, 0 };
			unsigned long long x;
			timerfd_settime(tfd, TFD_TIMER_ABSTIME, &it, NULL);
			ppoll(&pf, 1, NULL, NULL);
			if (read(tfd, &x, sizeof x) < 0)
				perror("timerfd");
		}
		late[kind][i / 3] = now_ns() - due;
	}
	printf("wake-up lateness of %lld-us holds, %d of each, CPU %ld, SCHED_FIFO 50, spinners on %ld CPUs (us)\n",
	       hold / 1000, n, cpus - 1, cpus);
	for (int k = 0; k < 3; k++) {
		double mean = 0;
		long long *v = late[k];
		qsort(v, n, sizeof *v, cmp);
		for (int i = 0; i < n; i++)
			mean += v[i];
		printf("%-20s mean %7.1f  p50 %7.1f  p90 %7.1f  p99 %8.1f  p99.9 %8.1f\n", name[k],
		       mean / n / 1e3, v[n / 2] / 1e3, v[n * 9 / 10] / 1e3, v[n * 99 / 100] / 1e3,
		       v[n * 999 / 1000] / 1e3);
	}
	return 0;
}
