/* SPDX-License-Identifier: Apache-2.0 */
/*
 * Print the store client's configuration table (keys of the
 * MOONCAKE_CONFIG_PATH file and their MOONCAKE_* variables) as markdown,
 * for docs/config.md (scripts/gendocs.sh). Accepts --help_markdown so it
 * is called like the daemons.
 */
#include <stdio.h>
#include <string.h>

#include "mc_cfg.h"
#include "store_cfg.h"

int main(int argc, char **argv)
{
	if (argc != 2 || strcmp(argv[1], "--help_markdown")) {
		fprintf(stderr, "usage: store_cfgdoc --help_markdown\n");
		return 2;
	}
	mc_cfg_doc_markdown(&mcs_cfg_spec, stdout);
	return 0;
}
