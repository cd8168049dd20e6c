/* standalone.c - runs a libFuzzer harness over files and directories, so the
 * seed corpus and past crashes replay as ordinary tests without libFuzzer. */
#include <dirent.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "fuzz.h"

static unsigned long runs;

/* Runs the harness on one file, read into a buffer of exactly its size so
 * that a sanitizer sees any read past the end. Returns 0 or -1. */
static int run_file(const char *path)
{
	FILE *f = fopen(path, "rb");
	uint8_t *buf = NULL;
	long size;
	int ret = -1;

	if (!f) {
		perror(path);
		return -1;
	}
	if (fseek(f, 0, SEEK_END) != 0 || (size = ftell(f)) < 0 ||
	    fseek(f, 0, SEEK_SET) != 0)
		goto out;
	buf = malloc(size ? (size_t)size : 1);
	if (!buf)
		goto out;
	if (size && fread(buf, 1, (size_t)size, f) != (size_t)size)
		goto out;
	LLVMFuzzerTestOneInput(buf, (size_t)size);
	runs++;
	ret = 0;
out:
	if (ret)
		fprintf(stderr, "%s: cannot read\n", path);
	free(buf);
	fclose(f);
	return ret;
}

static int run_path(const char *path)
{
	struct stat st;
	struct dirent *e;
	DIR *d;
	int ret = 0;

	if (stat(path, &st) != 0) {
		perror(path);
		return -1;
	}
	if (!S_ISDIR(st.st_mode))
		return run_file(path);
	d = opendir(path);
	if (!d) {
		perror(path);
		return -1;
	}
	while ((e = readdir(d)) != NULL) {
		char sub[4096];

		if (e->d_name[0] == '.')
			continue; /* ., .., and hidden files such as .gitkeep */
		if ((size_t)snprintf(sub, sizeof(sub), "%s/%s", path,
				     e->d_name) >= sizeof(sub)) {
			ret = -1;
			continue;
		}
		if (run_path(sub) != 0)
			ret = -1;
	}
	closedir(d);
	return ret;
}

int main(int argc, char **argv)
{
	int i, ret = 0;

	if (argc < 2) {
		fprintf(stderr, "usage: %s FILE|DIR...\n", argv[0]);
		return 2;
	}
	LLVMFuzzerTestOneInput((const uint8_t *)"", 0);
	for (i = 1; i < argc; i++)
		if (run_path(argv[i]) != 0)
			ret = 1;
	printf("%lu inputs replayed\n", runs);
	return ret;
}
