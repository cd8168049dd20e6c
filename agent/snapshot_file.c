/* snapshot_file.c - the snapshot file: atomic write, bounded read, a rejected file renamed aside, the logged load and save. */
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "log.h"
#include "snapshot.h"
#include "snapshot_int.h"

int64_t snapshot_wall_ms(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_REALTIME, &ts) != 0)
		return 0;
	return (int64_t)ts.tv_sec * 1000 + ts.tv_nsec / 1000000;
}

int snapshot_write_file(const char *path, const char *buf, size_t len,
			char *err, size_t errlen)
{
	size_t plen = strlen(path);
	char *tmp = malloc(plen + sizeof(".tmp.XXXXXX"));
	char *dir = malloc(plen + 2);
	int fd = -1, dfd = -1, rc = 0;
	const char *step = "";

	if (tmp == NULL || dir == NULL) {
		free(tmp);
		free(dir);
		snapshot_err(err, errlen, "out of memory");
		return -ENOMEM;
	}
	memcpy(tmp, path, plen);
	memcpy(tmp + plen, ".tmp.XXXXXX", sizeof(".tmp.XXXXXX"));
	/* The directory, for the fsync that makes the rename durable. */
	memcpy(dir, path, plen + 1);
	char *slash = strrchr(dir, '/');
	if (slash == NULL)
		memcpy(dir, ".", 2);
	else if (slash == dir)
		slash[1] = '\0';
	else
		*slash = '\0';

	fd = mkstemp(tmp);
	if (fd < 0) {
		rc = -errno;
		step = "create";
		tmp[0] = '\0';
		goto out;
	}
	for (size_t off = 0; off < len;) {
		ssize_t n = write(fd, buf + off, len - off);
		if (n < 0 && errno == EINTR)
			continue;
		if (n <= 0) {
			rc = n < 0 ? -errno : -EIO;
			step = "write";
			goto out;
		}
		off += (size_t)n;
	}
	if (fsync(fd) != 0) {
		rc = -errno;
		step = "fsync";
		goto out;
	}
	int cr = close(fd);
	fd = -1;
	if (cr != 0) {
		rc = -errno;
		step = "close";
		goto out;
	}
	if (rename(tmp, path) != 0) {
		rc = -errno;
		step = "rename";
		goto out;
	}
	tmp[0] = '\0'; /* renamed: nothing to remove */
	dfd = open(dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (dfd < 0 || fsync(dfd) != 0) {
		rc = -errno;
		step = "fsync directory";
	}
out:
	if (fd >= 0)
		close(fd);
	if (dfd >= 0)
		close(dfd);
	if (rc < 0) {
		snapshot_err(err, errlen, "%s %s: %s", step,
			     tmp[0] != '\0' ? tmp : path, strerror(-rc));
		if (tmp[0] != '\0')
			unlink(tmp);
	}
	free(tmp);
	free(dir);
	return rc;
}

int snapshot_write_sync(const struct core *c, const char *path,
			uint64_t now_ms, char *err, size_t errlen)
{
	char *buf;
	size_t len;
	int rc = snapshot_encode(c, now_ms, snapshot_wall_ms(), &buf, &len);
	if (rc < 0) {
		snapshot_err(err, errlen, "encode: out of memory");
		return rc;
	}
	rc = snapshot_write_file(path, buf, len, err, errlen);
	free(buf);
	return rc;
}

int snapshot_load(struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_result *res, char *err, size_t errlen)
{
	struct snapshot_result tmp_res;
	uint8_t *buf = NULL;
	struct stat st;
	int rc;

	if (res == NULL)
		res = &tmp_res;
	*res = (struct snapshot_result){ .version = 0 };
	/* O_NONBLOCK: opening a FIFO for reading would otherwise wait for a
	 * writer, for ever, before the fstat below can refuse it. A regular
	 * file's reads ignore the flag. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	if (fd < 0) {
		rc = -errno;
		snapshot_err(err, errlen, "open %s: %s", path, strerror(-rc));
		return rc;
	}
	if (fstat(fd, &st) != 0) {
		rc = -errno;
		snapshot_err(err, errlen, "stat %s: %s", path, strerror(-rc));
		goto out;
	}
	if (!S_ISREG(st.st_mode)) {
		rc = -EINVAL;
		snapshot_err(err, errlen, "%s is not a regular file (%s), refused",
			     path, S_ISFIFO(st.st_mode) ? "a FIFO"
			     : S_ISDIR(st.st_mode) ? "a directory"
			     : S_ISSOCK(st.st_mode) ? "a socket"
			     : "a device");
		goto out;
	}
	if ((uint64_t)st.st_size > SNAPSHOT_MAX_BYTES) {
		rc = -EFBIG;
		snapshot_err(err, errlen, "%jd bytes, more than the %u allowed",
			     (intmax_t)st.st_size, SNAPSHOT_MAX_BYTES);
	} else {
		size_t size = (size_t)st.st_size, off = 0;
		buf = malloc(size ? size : 1);
		if (buf == NULL) {
			rc = -ENOMEM;
			snapshot_err(err, errlen, "out of memory");
			goto out;
		}
		while (off < size) {
			ssize_t n = read(fd, buf + off, size - off);
			if (n < 0 && errno == EINTR)
				continue;
			if (n < 0) {
				rc = -errno;
				snapshot_err(err, errlen, "read %s: %s", path,
					     strerror(-rc));
				goto out;
			}
			if (n == 0)
				break; /* shrank meanwhile: the parser says so */
			off += (size_t)n;
		}
		rc = snapshot_load_buffer(c, buf, off, now_ms, snapshot_wall_ms(),
					  res, err, errlen);
	}
	if (rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG) {
		/* Aside, not deleted: it may be needed to see what went wrong,
		 * and the next snapshot must not be refused by it. */
		size_t plen = strlen(path);
		char *aside = malloc(plen + sizeof(".corrupt"));
		if (aside != NULL) {
			memcpy(aside, path, plen);
			memcpy(aside + plen, ".corrupt", sizeof(".corrupt"));
			int moved = rename(path, aside) == 0 ? 0 : errno;
			if (err != NULL && errlen > 0) {
				size_t elen = strnlen(err, errlen - 1);
				if (moved == 0)
					snapshot_err(err + elen, errlen - elen,
						     "; renamed to %s", aside);
				else
					snapshot_err(err + elen, errlen - elen,
						     "; cannot rename it to %s: %s",
						     aside, strerror(moved));
			}
			free(aside);
		}
	}
out:
	close(fd);
	free(buf);
	return rc;
}

int snapshot_restore(struct core *c, const char *path, uint64_t now_ms,
		     struct snapshot_stats *st)
{
	struct snapshot_result res;
	char err[1024], q[1100], qp[600];

	if (path == NULL || path[0] == '\0')
		return 0;
	log_quote(qp, sizeof(qp), path, strlen(path));
	uint64_t t0 = uv_hrtime();
	int rc = snapshot_load(c, path, now_ms, &res, err, sizeof(err));
	uint64_t us = (uv_hrtime() - t0) / 1000;
	if (rc == 0) {
		log_info("snapshot loaded",
			 "file=%s bytes=%" PRIu64 " version=%" PRIu32
			 " endpoints=%" PRIu64
			 " endpoints_unknown=%" PRIu64 " entries=%" PRIu64
			 " restored=%" PRIu64 " expired=%" PRIu64
			 " unknown_endpoint=%" PRIu64 " homes=%" PRIu64
			 " homes_restored=%" PRIu64 " cooldowns_capped=%" PRIu64
			 " downtime_ms=%" PRIu64 " load_us=%" PRIu64,
			 qp, res.bytes, res.version, res.endpoints,
			 res.endpoints_unknown, res.entries, res.entries_restored,
			 res.entries_expired, res.entries_unknown, res.homes,
			 res.homes_restored, res.cooldowns_capped, res.downtime_ms, us);
		if (st != NULL) {
			st->loaded = true;
			st->load_us = us;
			st->restored = res.entries_restored;
			st->dropped_expired = res.entries_expired;
			st->dropped_unknown = res.entries_unknown;
		}
	} else if (rc == -ENOENT) {
		log_info("no snapshot: starting cold", "file=%s", qp);
	} else if (rc == -EBADMSG || rc == -ENOTSUP || rc == -EFBIG) {
		log_error("snapshot rejected: starting cold", "file=%s error=%s",
			  qp, log_quote(q, sizeof(q), err, strlen(err)));
		if (st != NULL)
			st->corrupt++;
	} else if (rc == -EINVAL) {
		/* A FIFO or a device put there by mistake: left in place (the
		 * next write renames its temp file over it). */
		log_error("snapshot path is not a regular file: starting cold",
			  "file=%s error=%s", qp,
			  log_quote(q, sizeof(q), err, strlen(err)));
	} else {
		log_error("cannot read the snapshot: starting cold",
			  "file=%s error=%s", qp,
			  log_quote(q, sizeof(q), err, strlen(err)));
	}
	return rc;
}

int snapshot_save(const struct core *c, const char *path, uint64_t now_ms,
		  struct snapshot_stats *st)
{
	char err[512], q[600], qp[600];
	if (path == NULL || path[0] == '\0')
		return 0;
	log_quote(qp, sizeof(qp), path, strlen(path));
	uint64_t t0 = uv_hrtime();
	int rc = snapshot_write_sync(c, path, now_ms, err, sizeof(err));
	uint64_t us = (uv_hrtime() - t0) / 1000;
	if (rc == 0) {
		log_info("snapshot written", "file=%s write_us=%" PRIu64, qp, us);
		if (st != NULL) {
			st->writes++;
			st->last_write_unix_ms = snapshot_wall_ms();
			st->last_write_us = us;
			st->last_hold_us = us; /* at exit, all on the loop */
		}
	} else {
		log_error("snapshot not written", "file=%s error=%s", qp,
			  log_quote(q, sizeof(q), err, strlen(err)));
		if (st != NULL)
			st->write_failures++;
	}
	return rc;
}
