// SPDX-License-Identifier: GPL-2.0-or-later
/*
 * source.c — the name of a store as users write it: a block device or image
 * path, or "rbd:POOL/IMAGE" / "rbd:POOL/NAMESPACE/IMAGE" for a Ceph RBD
 * image (the rbd tool's own POOL/[NAMESPACE/]IMAGE spec behind a prefix, so
 * a path can never be taken for an image). One parser for the daemon,
 * mkchunkfs and fsck.chunkfs, and for anything that later lists stores.
 *
 * What this file does not do: reach the cluster (backend_rbd.c) or check
 * that a path exists (the callers do, with their own messages).
 */
#include <errno.h>
#include <string.h>

#include "iopath/iopath.h"

bool cfs_source_is_rbd(const char *source)
{
	return source && strncmp(source, CFS_RBD_PREFIX, strlen(CFS_RBD_PREFIX)) == 0;
}

/* Copy one '/'-separated part; false if it is empty or too long. */
static bool take_part(const char *start, size_t length, char out[CFS_RBD_NAME_BYTES])
{
	if (length == 0 || length >= CFS_RBD_NAME_BYTES)
		return false;
	memcpy(out, start, length);
	out[length] = '\0';
	return true;
}

int cfs_rbd_name_parse(const char *source, struct cfs_rbd_name *name, const char **why)
{
	const char *spec, *parts[3];
	size_t lengths[3], count = 0;

	memset(name, 0, sizeof(*name));
	if (!cfs_source_is_rbd(source)) {
		*why = "an RBD image is named rbd:POOL/IMAGE or rbd:POOL/NAMESPACE/IMAGE";
		return -EINVAL;
	}
	spec = source + strlen(CFS_RBD_PREFIX);
	if (strchr(spec, ',')) { /* SRC1,SRC2: a pool's stores (fs/POOLS.md) */
		*why = "a ',' lists a pool's stores, where one RBD image name is expected";
		return -EINVAL;
	}
	if (strchr(spec, '@')) {
		*why = "snapshots (IMAGE@SNAP) cannot hold a store: name the image itself";
		return -EINVAL;
	}
	for (const char *p = spec; *p; p++) {
		if ((unsigned char)*p <= ' ') {
			*why = "an RBD name has no spaces or control characters";
			return -EINVAL;
		}
	}
	for (const char *p = spec;; p++) {
		const char *slash = strchr(p, '/');

		if (count == 3) {
			*why = "too many '/': rbd:POOL/IMAGE or rbd:POOL/NAMESPACE/IMAGE";
			return -EINVAL;
		}
		parts[count] = p;
		lengths[count] = slash ? (size_t)(slash - p) : strlen(p);
		count++;
		if (!slash)
			break;
		p = slash;
	}
	if (count < 2) {
		*why = "no pool: rbd:POOL/IMAGE or rbd:POOL/NAMESPACE/IMAGE";
		return -EINVAL;
	}
	if (!take_part(parts[0], lengths[0], name->pool) ||
	    (count == 3 && !take_part(parts[1], lengths[1], name->nspace)) ||
	    !take_part(parts[count - 1], lengths[count - 1], name->image)) {
		*why = "each of pool, namespace and image is 1 to 127 bytes";
		return -EINVAL;
	}
	return 0;
}

void cfs_io_config_source(struct cfs_io_config *cfg, const char *source)
{
	cfg->backend = cfs_source_is_rbd(source) ? "rbd" : "uring";
	cfg->path = source;
}
