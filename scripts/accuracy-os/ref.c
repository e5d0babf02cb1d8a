/*
 * ref.c: a single-threaded reference for smtlab's OS latency rows, in the shape of
 * lmbench's processes: one process, one thread, little memory, pinned to one CPU.
 * Each row does per iteration exactly what smtlab's row of the same name does (see
 * the modules of crates/bench/src/os), so the two figures can be held side by side.
 *
 * Usage: ref BENCH CPU [BATCHES [BATCH_MS [MAPPINGS ANON_KIB]]]
 *   BENCH    null-syscall read write stat fstat open-close select-file select-tcp
 *            sig-install sig-handler pipe-latency fork-exit fork-exec fork-sh
 *   CPU      the CPU this process (and its children) run on
 *   BATCHES  timed batches (default 30); BATCH_MS each batch's length (default 10):
 *            smtlab's default sample count and length
 *   MAPPINGS ANON_KIB  grow this process first to at least that many mappings and that
 *            many KiB of anonymous resident memory (`RssAnon`): a fork copies the
 *            page-table entries of anonymous pages and every mapping, so a fork row is
 *            held against smtlab's only at the same size (its `forking_mappings` and
 *            `forking_anon_bytes`); prints the size reached to standard error
 * Prints "MIN MEDIAN": the fastest batch and the median batch, in nanoseconds per
 * operation (sig-handler: fastest catching minus fastest sending batch, and the median of
 * the per-batch differences). The batch size is calibrated first (doubling until a batch takes BATCH_MS).
 * Build: gcc -O2 -Wl,-z,now -o ref ref.c (bound at load, as smtlab's binaries are)
 */
#define _GNU_SOURCE
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <arpa/inet.h>
#include <sched.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/select.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

static void die(const char *what)
{
	fprintf(stderr, "ref: %s: %s\n", what, strerror(errno));
	exit(2);
}

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + ts.tv_nsec;
}

/* State of the benchmark chosen, set up once. */
static int fd = -1;
static char path[256];
static int nfds;
static fd_set wset;
static int nsel;
static struct sigaction sa, old;
static volatile sig_atomic_t caught;
static int to_child = -1, from_child = -1;
static pid_t echo_pid;
static uint32_t seq;
static char *const true_argv[] = {"/bin/true", NULL};
static char *const sh_argv[] = {"sh", "-c", "/bin/true", NULL};
static char *const empty_env[] = {NULL};
static char *const sh_env[] = {"PATH=/usr/bin:/bin", NULL};
static pid_t tid;

static void op_null(void)
{
	if (syscall(SYS_getppid) < 0)
		die("getppid");
}

static void op_read(void)
{
	char c;
	if (read(fd, &c, 1) != 1)
		die("read");
}

static void op_write(void)
{
	char c = 0;
	if (write(fd, &c, 1) != 1)
		die("write");
}

static void op_stat(void)
{
	struct stat st;
	if (stat(path, &st) != 0)
		die("stat");
}

static void op_fstat(void)
{
	struct stat st;
	if (fstat(fd, &st) != 0)
		die("fstat");
}

static void op_open_close(void)
{
	int f = open(path, O_RDONLY | O_CLOEXEC);
	if (f < 0)
		die("open");
	if (close(f) != 0)
		die("close");
}

static void op_select(void)
{
	fd_set w = wset;
	struct timeval tv = {0, 0};
	if (select(nfds, NULL, &w, NULL, &tv) != nsel)
		die("select");
}

static void op_sig_install(void)
{
	if (sigaction(SIGUSR1, &sa, &old) != 0)
		die("sigaction");
}

static void on_usr1(int s)
{
	(void)s;
	caught++;
}

static void op_send0(void)
{
	if (syscall(SYS_tgkill, getpid(), tid, 0) != 0)
		die("tgkill 0");
}

static void op_send_usr1(void)
{
	if (syscall(SYS_tgkill, getpid(), tid, SIGUSR1) != 0)
		die("tgkill SIGUSR1");
}

static void op_pipe(void)
{
	uint32_t t = ++seq & 0x7fffffff, back;
	if (write(to_child, &t, 4) != 4)
		die("pipe write");
	if (read(from_child, &back, 4) != 4 || back != t)
		die("pipe read");
}

static void fork_wait(char *const *argv, char *const *envp, const char *prog)
{
	int status;
	pid_t p = fork();
	if (p < 0)
		die("fork");
	if (p == 0) {
		if (prog)
			execve(prog, argv, envp);
		_exit(prog ? 127 : 0);
	}
	if (waitpid(p, &status, 0) != p || !WIFEXITED(status) || WEXITSTATUS(status) != 0)
		die("child");
}

static void op_fork_exit(void) { fork_wait(NULL, NULL, NULL); }
static void op_fork_exec(void) { fork_wait(true_argv, empty_env, "/bin/true"); }
static void op_fork_sh(void) { fork_wait(sh_argv, sh_env, "/bin/sh"); }

/*
 * Nanoseconds per operation of one batch of n. One function per operation, so that the
 * timed loop calls it directly, as smtlab's loops (generic, inlined) and lmbench's do:
 * an indirect call per iteration costs 15-20 ns more per system call on kernels that
 * clear the branch history on every kernel entry.
 */
typedef double (*batch_fn)(uint64_t n);
#define BATCH(name, op)                                                                   \
	static double name(uint64_t n)                                                    \
	{                                                                                 \
		uint64_t t0 = now_ns();                                                   \
		for (uint64_t i = 0; i < n; i++)                                          \
			op();                                                             \
		return (double)(now_ns() - t0) / (double)n;                               \
	}
BATCH(b_null, op_null)
BATCH(b_read, op_read)
BATCH(b_write, op_write)
BATCH(b_stat, op_stat)
BATCH(b_fstat, op_fstat)
BATCH(b_open_close, op_open_close)
BATCH(b_select, op_select)
BATCH(b_sig_install, op_sig_install)
BATCH(b_send0, op_send0)
BATCH(b_send_usr1, op_send_usr1)
BATCH(b_pipe, op_pipe)
BATCH(b_fork_exit, op_fork_exit)
BATCH(b_fork_exec, op_fork_exec)
BATCH(b_fork_sh, op_fork_sh)

static int cmp(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static void temp_file(const char *bench)
{
	const char *dir = getenv("TMPDIR");
	snprintf(path, sizeof path, "%s/smtlab-%s-%d-0", dir && *dir ? dir : "/tmp", bench,
		 (int)getpid());
	fd = open(path, O_RDWR | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
	if (fd < 0)
		die(path);
}

static void echo_child(int cpu)
{
	int down[2], up[2];
	if (pipe2(down, O_CLOEXEC) || pipe2(up, O_CLOEXEC))
		die("pipe");
	echo_pid = fork();
	if (echo_pid < 0)
		die("fork");
	if (echo_pid == 0) {
		cpu_set_t s;
		uint32_t t;
		CPU_ZERO(&s);
		CPU_SET(cpu, &s);
		sched_setaffinity(0, sizeof s, &s);
		close(down[1]);
		close(up[0]);
		while (read(down[0], &t, 4) == 4)
			if (write(up[1], &t, 4) != 4)
				break;
		_exit(0);
	}
	close(down[0]);
	close(up[1]);
	to_child = down[1];
	from_child = up[0];
}

static void tcp_sockets(int n)
{
	struct sockaddr_in a = {.sin_family = AF_INET, .sin_port = 0};
	socklen_t len = sizeof a;
	int l = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (l < 0 || bind(l, (struct sockaddr *)&a, sizeof a) || listen(l, n) ||
	    getsockname(l, (struct sockaddr *)&a, &len))
		die("listen on 127.0.0.1");
	FD_ZERO(&wset);
	nfds = 0;
	for (int i = 0; i < n; i++) {
		int c = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
		if (c < 0 || connect(c, (struct sockaddr *)&a, sizeof a))
			die("connect");
		if (accept4(l, NULL, NULL, SOCK_CLOEXEC) < 0)
			die("accept");
		FD_SET(c, &wset);
		if (c + 1 > nfds)
			nfds = c + 1;
	}
	nsel = n;
}

/* This process's mappings (lines of its maps) and anonymous resident KiB. */
static void own_size(long *maps, long *anon_kib)
{
	char line[512];
	FILE *f = fopen("/proc/self/maps", "r");
	if (!f)
		die("/proc/self/maps");
	for (*maps = 0; fgets(line, sizeof line, f);)
		*maps += strchr(line, '\n') != NULL;
	fclose(f);
	if (!(f = fopen("/proc/self/status", "r")))
		die("/proc/self/status");
	for (*anon_kib = 0; fgets(line, sizeof line, f);)
		sscanf(line, "RssAnon: %ld", anon_kib);
	fclose(f);
}

/* One new anonymous mapping of `pages` pages, every page touched. */
static void touched_pages(long pages)
{
	long page = sysconf(_SC_PAGESIZE);
	char *p = mmap(NULL, pages * page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (p == MAP_FAILED)
		die("mmap");
	for (long i = 0; i < pages; i++)
		p[i * page] = 1;
}

/*
 * Grows this process to at least `maps` mappings and `anon_kib` KiB of anonymous
 * memory. Mappings first: a region reserved without access, one page in two of it
 * opened and touched, each splitting the region (two mappings more, one holding a
 * page, as a process's data and guard mappings do); then memory, in one mapping.
 */
static void grow_to(long maps, long anon_kib)
{
	long page = sysconf(_SC_PAGESIZE), have_maps, have_anon;
	own_size(&have_maps, &have_anon);
	long need = maps > have_maps ? maps - have_maps : 0;
	char *region = mmap(NULL, (2 * need + 2) * page, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
	if (region == MAP_FAILED)
		die("mmap");
	for (long i = 1; have_maps < maps && i < 2 * need + 2; i += 2) {
		if (mprotect(region + i * page, page, PROT_READ | PROT_WRITE))
			die("mprotect");
		region[i * page] = 1;
		own_size(&have_maps, &have_anon);
	}
	if (anon_kib > have_anon)
		touched_pages((anon_kib - have_anon + 3) * 1024 / page);
	own_size(&have_maps, &have_anon);
	fprintf(stderr, "ref: grown to %ld mappings, %ld KiB anonymous\n", have_maps, have_anon);
}

int main(int argc, char **argv)
{
	if (argc < 3) {
		fprintf(stderr, "usage: ref BENCH CPU [BATCHES [BATCH_MS [MAPPINGS ANON_KIB]]]\n");
		return 2;
	}
	const char *bench = argv[1];
	int cpu = atoi(argv[2]);
	int batches = argc > 3 ? atoi(argv[3]) : 30;
	double batch_ms = argc > 4 ? atof(argv[4]) : 10;
	if (argc > 6)
		grow_to(atol(argv[5]), atol(argv[6]));
	cpu_set_t set;
	CPU_ZERO(&set);
	CPU_SET(cpu, &set);
	if (sched_setaffinity(0, sizeof set, &set))
		die("sched_setaffinity");
	tid = (pid_t)syscall(SYS_gettid);
	batch_fn op;
	int handler = 0;

	if (!strcmp(bench, "null-syscall")) {
		op = b_null;
	} else if (!strcmp(bench, "read")) {
		if ((fd = open("/dev/zero", O_RDONLY | O_CLOEXEC)) < 0)
			die("/dev/zero");
		op = b_read;
	} else if (!strcmp(bench, "write")) {
		if ((fd = open("/dev/null", O_WRONLY | O_CLOEXEC)) < 0)
			die("/dev/null");
		op = b_write;
	} else if (!strcmp(bench, "stat") || !strcmp(bench, "fstat") ||
		   !strcmp(bench, "open-close")) {
		temp_file(bench);
		op = !strcmp(bench, "stat") ? b_stat : !strcmp(bench, "fstat") ? b_fstat : b_open_close;
	} else if (!strcmp(bench, "select-file")) {
		temp_file(bench);
		FD_ZERO(&wset);
		for (int i = 0; i < 10; i++) {
			int d = fcntl(fd, F_DUPFD_CLOEXEC, 0);
			if (d < 0)
				die("dup");
			FD_SET(d, &wset);
			if (d + 1 > nfds)
				nfds = d + 1;
		}
		nsel = 10;
		op = b_select;
	} else if (!strcmp(bench, "select-tcp")) {
		tcp_sockets(10);
		op = b_select;
	} else if (!strcmp(bench, "sig-install") || !strcmp(bench, "sig-handler")) {
		sa.sa_handler = on_usr1;
		sigemptyset(&sa.sa_mask);
		sa.sa_flags = 0;
		if (sigaction(SIGUSR1, &sa, &old))
			die("sigaction");
		handler = !strcmp(bench, "sig-handler");
		op = handler ? b_send_usr1 : b_sig_install;
	} else if (!strcmp(bench, "pipe-latency")) {
		echo_child(cpu);
		op = b_pipe;
	} else if (!strcmp(bench, "fork-exit")) {
		op = b_fork_exit;
	} else if (!strcmp(bench, "fork-exec")) {
		op = b_fork_exec;
	} else if (!strcmp(bench, "fork-sh")) {
		op = b_fork_sh;
	} else {
		fprintf(stderr, "ref: unknown benchmark %s\n", bench);
		return 2;
	}

	/* Calibrate: double the batch until one lasts batch_ms. */
	uint64_t n = 1;
	while (n < (1ull << 40) && op(n) * n < batch_ms * 1e6)
		n *= 2;
	double *v = calloc(batches, sizeof *v), *sent = calloc(batches, sizeof *v);
	for (int b = 0; b < batches; b++) {
		/* sig-handler, as smtlab and lmbench: minus the cost of sending (signal 0) */
		sent[b] = handler ? b_send0(n) : 0;
		v[b] = op(n);
	}
	/*
	 * The fastest batch: for sig-handler the fastest catching batch minus the fastest
	 * sending one (the fastest difference would favour a disturbed sending batch).
	 */
	double best = v[0], best_sent = sent[0];
	for (int b = 1; b < batches; b++) {
		best = v[b] < best ? v[b] : best;
		best_sent = sent[b] < best_sent ? sent[b] : best_sent;
	}
	for (int b = 0; b < batches; b++)
		v[b] -= sent[b];
	qsort(v, batches, sizeof *v, cmp);
	printf("%.2f %.2f\n", best - best_sent, v[batches / 2]);

	if (echo_pid > 0) {
		close(to_child);
		waitpid(echo_pid, NULL, 0);
	}
	if (path[0])
		unlink(path);
	return 0;
}
