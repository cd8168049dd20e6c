/* spop.c - placeholder until the codec lands. */
#include "spop.h"
