/* slow_creat.c - LD_PRELOAD shim for script_races.sh: a shell's open(O_CREAT) of a log file is delayed, as a forked shell descheduled on a loaded machine would be. */
/* Both open and open64 are defined here by name: the build's
 * _FILE_OFFSET_BITS=64 would turn a definition of open into open64 alone,
 * and a shell may call either. */
#undef _FILE_OFFSET_BITS
#define _GNU_SOURCE
#include <dlfcn.h>
#include <fcntl.h>
#include <stdarg.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

/* The files the scripts start their agents with: stderr.log
 * (metrics_agent.sh) and log (snapshot_daemon.sh). */
static int slow_creat_match(const char *path, int flags)
{
	if ((flags & O_CREAT) == 0)
		return 0;
	const char *base = strrchr(path, '/');
	base = base != NULL ? base + 1 : path;
	return strcmp(base, "stderr.log") == 0 || strcmp(base, "log") == 0;
}

/* WARMLANE_SLOW_CREAT_MS, default 500. */
static void slow_creat_wait(void)
{
	const char *v = getenv("WARMLANE_SLOW_CREAT_MS");
	long ms = v != NULL ? strtol(v, NULL, 10) : 500;
	struct timespec ts = { ms / 1000, (ms % 1000) * 1000000L };
	nanosleep(&ts, NULL);
}

typedef int (*slow_creat_open_fn)(const char *, int, ...);

static int slow_creat_open(const char *sym, slow_creat_open_fn *real,
			   const char *path, int flags, mode_t mode)
{
	if (*real == NULL)
		*(void **)real = dlsym(RTLD_NEXT, sym);
	if (slow_creat_match(path, flags))
		slow_creat_wait();
	return (*real)(path, flags, mode);
}

int open(const char *path, int flags, ...)
{
	static slow_creat_open_fn real;
	mode_t mode = 0;
	if (flags & O_CREAT) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	return slow_creat_open("open", &real, path, flags, mode);
}

int open64(const char *path, int flags, ...)
{
	static slow_creat_open_fn real;
	mode_t mode = 0;
	if (flags & O_CREAT) {
		va_list ap;
		va_start(ap, flags);
		mode = (mode_t)va_arg(ap, int);
		va_end(ap);
	}
	return slow_creat_open("open64", &real, path, flags, mode);
}
