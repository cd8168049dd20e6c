/* config_yaml.h - the configuration's libyaml pass (config_yaml.c), for config.c. */
#ifndef WARMLANE_CONFIG_YAML_H
#define WARMLANE_CONFIG_YAML_H

#include <stdbool.h>
#include <stddef.h>

#include "config_errs.h"
#include "config_pos.h"
#include "config_schema.h"

/* Reads the document data (len bytes; name labels messages) into *raw
 * (NULL: an empty document; free with config_raw_free whatever the
 * return), noting in at where each value starts. Every problem goes to
 * errs at its line and column: an unknown key (with the nearest known
 * one), a duplicate key, a value of the wrong kind, a list too long.
 * *stopped: a YAML syntax error or a bound (nesting, a second document,
 * the number of events) ended the pass, so the rest of the file is
 * unknown. Returns 0 or -ENOMEM. */
int config_yaml_read(const char *name, const char *data, size_t len,
		     struct config_errs *errs, struct config_pos_table *at,
		     struct raw_config **raw, bool *stopped);

#endif
