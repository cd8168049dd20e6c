/* ctl_show.c - the command socket's commands and their answers, plain text or -json: show info, endpoints, affinity, clear affinity, set endpoint, explain. */
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core.h"
#include "ctl.h"
#include "ctl_cmd.h"
#include "route.h"
#include "server.h"
#include "trace.h"
#include "warmlane_version.h"

/* ---- show info ---------------------------------------------------------- */

uint64_t ctl_decisions(const struct ctl *c)
{
	struct core_stats st;
	core_stats(c->srv->route.core, &st);
	uint64_t n = 0;
	for (int r = 0; r < CORE_REASON_COUNT; r++)
		n += st.decisions[r];
	return n;
}

/* Over the samples of the last CTL_RATE_SLOTS - 1 seconds. */
static double ctl_rate(const struct ctl *c, uint64_t now_ms, uint64_t now_n)
{
	if (c->rate_n == 0)
		return 0;
	unsigned oldest = (c->rate_head + CTL_RATE_SLOTS - c->rate_n) % CTL_RATE_SLOTS;
	uint64_t ms = c->rate[oldest].ms, n = c->rate[oldest].decisions;
	if (now_ms <= ms || now_n < n)
		return 0;
	return (double)(now_n - n) * 1000.0 / (double)(now_ms - ms);
}

/* What made policy.routers route alone: the configuration (one, or
 * several: never), the engines' counts, the shared warm hints, the
 * requests' turns; "-" for none. */
static const char *routers_by(const struct core_routers_info *r)
{
	static const char *const by[8] = {
		"-", "engines", "hints", "engines,hints", "turns",
		"engines,turns", "hints,turns", "engines,hints,turns",
	};
	if (r->mode != CORE_ROUTERS_AUTO)
		return "config";
	return by[(r->engines ? 1 : 0) | (r->hints ? 2 : 0) | (r->turns ? 4 : 0)];
}

static const char *peers_name(enum core_peers p)
{
	return p == CORE_PEERS_CONNECTED ? "connected" :
	       p == CORE_PEERS_APART ? "apart" : "unknown";
}

void ctl_cmd_show_info(struct ctl_cmd *cmd)
{
	struct ctl *c = cmd->ctl;
	struct ctl_out *o = cmd->o;
	struct core_stats st;
	core_stats(c->srv->route.core, &st);
	uint64_t n = ctl_decisions(c);
	double rate = ctl_rate(c, cmd->now_ms, n);
	uint64_t up_s = (cmd->now_ms - c->start_ms) / 1000;
	const char *cfg = c->config_path[0] != '\0' ? c->config_path : NULL;
	struct core_routers_info ri;
	core_routers_info(c->srv->route.core, &ri);
	double share = ri.share >= 0 ? ri.share : NAN;
	double skips = ri.skips >= 0 ? ri.skips : NAN;
	if (cmd->json) {
		ctl_out_printf(o, "{\"version\":");
		ctl_out_json_cstr(o, WARMLANE_VERSION);
		ctl_out_printf(o, ",\"pid\":%ld,\"uptime_s\":%" PRIu64 ",\"config\":",
			       (long)getpid(), up_s);
		ctl_out_json_cstr(o, cfg);
		ctl_out_printf(o, ",\"decisions\":%" PRIu64 ",\"decisions_per_s\":", n);
		ctl_out_num(o, rate, true);
		ctl_out_printf(o, ",\"endpoints\":%u,\"affinity_entries\":%u,"
			       "\"affinity_capacity\":%u,\"spop_connections\":%" PRIu64
			       ",\"command_connections\":%u,\"routers\":\"%s\","
			       "\"routers_alone\":%s,\"routers_by\":\"%s\",\"routers_share\":",
			       st.endpoints, st.affinity_entries, st.affinity_capacity,
			       c->srv->stats.conn_active, c->n_conns,
			       core_routers_name(ri.mode), ri.alone ? "true" : "false",
			       routers_by(&ri));
		ctl_out_num(o, share, true);
		ctl_out_printf(o, ",\"routers_turn_skips\":");
		ctl_out_num(o, skips, true);
		ctl_out_printf(o, ",\"routers_peers\":\"%s\",\"affinity_ttl_s\":%" PRIu64 "}\n",
			       peers_name(ri.peers), ri.ttl_ms / 1000);
		return;
	}
	ctl_out_printf(o, "version: %s\npid: %ld\nuptime_s: %" PRIu64 "\nconfig: %s\n"
		       "decisions: %" PRIu64 "\ndecisions_per_s: ",
		       WARMLANE_VERSION, (long)getpid(), up_s, cfg != NULL ? cfg : "-",
		       n);
	ctl_out_num(o, rate, false);
	ctl_out_printf(o, "\nendpoints: %u\naffinity_entries: %u\naffinity_capacity: %u\n"
		       "spop_connections: %" PRIu64 "\ncommand_connections: %u\n"
		       "routers: %s\nrouters_alone: %s\nrouters_by: %s\nrouters_share: ",
		       st.endpoints, st.affinity_entries, st.affinity_capacity,
		       c->srv->stats.conn_active, c->n_conns, core_routers_name(ri.mode),
		       ri.alone ? "yes" : "no", routers_by(&ri));
	ctl_out_num(o, share, false);
	ctl_out_printf(o, "\nrouters_turn_skips: ");
	ctl_out_num(o, skips, false);
	ctl_out_printf(o, "\nrouters_peers: %s\naffinity_ttl_s: %" PRIu64 "\n",
		       peers_name(ri.peers), ri.ttl_ms / 1000);
}

/* ---- show endpoints ----------------------------------------------------- */

static const char *ep_key_state(const struct core_endpoint_info *in)
{
	if (in->key_id == NULL)
		return "-";
	return in->key_dead ? "dead" : in->key_suspect ? "suspect" : "ok";
}

/* What HAProxy's layer-7 check says of it (core_endpoint_check): - none
 * in the last 10 s, slow against its peers', vouch (found recovered, its
 * own answers not yet trusted), else ok. */
static const char *ep_check_state(const struct core_endpoint_info *in)
{
	if (in->check_slow)
		return "slow";
	if (in->check_vouch)
		return "vouch";
	return in->check_ms > 0 ? "ok" : "-";
}

void ctl_cmd_show_endpoints(struct ctl_cmd *cmd)
{
	const struct core *core = cmd->ctl->srv->route.core;
	struct ctl_out *o = cmd->o;
	unsigned shown = 0, total = 0;
	if (cmd->json)
		ctl_out_printf(o, "{\"endpoints\":[");
	else
		ctl_out_printf(o, "# backend server key admin view breaker cooldown_left_ms "
			       "in_flight ewma_ms samples ewma_stream_ms samples_stream "
			       "e2e_ms_per_kib e2e_stream_ms_per_kib key_state dead_key_left_ms "
			       "window_ok window_fail decisions check_ms check rejoin_left_ms "
			       "load_avg ms_per_request speed probed\n");
	for (int i = core_endpoint_next(core, -1); i >= 0;
	     i = core_endpoint_next(core, i)) {
		struct core_endpoint_info in;
		if (core_endpoint_info(core, i, cmd->now_ms, &in) < 0)
			continue;
		total++;
		if (o->full)
			continue;
		size_t mark = o->len;
		const char *view = in.disabled ? "disabled" : in.drained ? "drain" : "ready";
		if (cmd->json) {
			ctl_out_printf(o, "%s{\"backend\":", shown > 0 ? "," : "");
			ctl_out_json_cstr(o, in.backend);
			ctl_out_printf(o, ",\"server\":");
			ctl_out_json_cstr(o, in.server);
			ctl_out_printf(o, ",\"key\":");
			ctl_out_json_cstr(o, in.key_id);
			ctl_out_printf(o, ",\"admin\":\"%s\",\"view\":\"%s\",\"breaker\":\"%s\","
				       "\"cooldown_left_ms\":%" PRIu64 ",\"in_flight\":%u,"
				       "\"slots\":%u,\"weight\":",
				       core_admin_name(in.admin), view,
				       core_breaker_name(in.breaker), in.cooldown_left_ms,
				       in.in_flight, in.slots);
			ctl_out_num(o, in.weight, true);
			ctl_out_printf(o, ",\"ewma_ms\":");
			ctl_out_num(o, in.ewma_ms[CORE_KIND_PLAIN], true);
			ctl_out_printf(o, ",\"samples\":%u,\"ewma_stream_ms\":",
				       in.samples[CORE_KIND_PLAIN]);
			ctl_out_num(o, in.ewma_ms[CORE_KIND_STREAM], true);
			ctl_out_printf(o, ",\"samples_stream\":%u,\"e2e_ms_per_kib\":",
				       in.samples[CORE_KIND_STREAM]);
			ctl_out_num(o, in.e2e_ewma_ms[CORE_KIND_PLAIN], true);
			ctl_out_printf(o, ",\"e2e_samples\":%u,\"e2e_stream_ms_per_kib\":",
				       in.e2e_samples[CORE_KIND_PLAIN]);
			ctl_out_num(o, in.e2e_ewma_ms[CORE_KIND_STREAM], true);
			ctl_out_printf(o, ",\"e2e_stream_samples\":%u,\"key_state\":\"%s\","
				       "\"dead_key_left_ms\":%" PRIu64 ",\"window_ok\":%u,"
				       "\"window_fail\":%u,\"decisions\":%" PRIu64 ",\"check_ms\":",
				       in.e2e_samples[CORE_KIND_STREAM], ep_key_state(&in),
				       in.dead_key_left_ms, in.window_ok, in.window_fail,
				       in.decisions);
			ctl_out_num(o, in.check_ms, true);
			ctl_out_printf(o, ",\"check\":\"%s\",\"rejoin_left_ms\":%" PRIu64
				       ",\"load_avg\":", ep_check_state(&in), in.rejoin_left_ms);
			ctl_out_num(o, in.load_avg, true);
			ctl_out_printf(o, ",\"ms_per_request\":");
			ctl_out_num(o, in.ms_per_request, true);
			ctl_out_printf(o, ",\"speed\":\"%s\",\"probed\":%s}",
				       core_speed_name(in.speed), in.probed ? "true" : "false");
		} else {
			ctl_out_printf(o, "%s %s %s %s %s %s %" PRIu64 " %u ", in.backend,
				       in.server, in.key_id != NULL ? in.key_id : "-",
				       core_admin_name(in.admin), view,
				       core_breaker_name(in.breaker), in.cooldown_left_ms,
				       in.in_flight);
			ctl_out_num(o, in.ewma_ms[CORE_KIND_PLAIN], false);
			ctl_out_printf(o, " %u ", in.samples[CORE_KIND_PLAIN]);
			ctl_out_num(o, in.ewma_ms[CORE_KIND_STREAM], false);
			ctl_out_printf(o, " %u ", in.samples[CORE_KIND_STREAM]);
			ctl_out_num(o, in.e2e_ewma_ms[CORE_KIND_PLAIN], false);
			ctl_out_printf(o, " ");
			ctl_out_num(o, in.e2e_ewma_ms[CORE_KIND_STREAM], false);
			ctl_out_printf(o, " %s %" PRIu64 " %u %u %" PRIu64 " ",
				       ep_key_state(&in), in.dead_key_left_ms,
				       in.window_ok, in.window_fail, in.decisions);
			ctl_out_num(o, in.check_ms, false);
			ctl_out_printf(o, " %s %" PRIu64 " ", ep_check_state(&in),
				       in.rejoin_left_ms);
			ctl_out_num(o, in.load_avg, false);
			ctl_out_printf(o, " ");
			ctl_out_num(o, in.ms_per_request, false);
			ctl_out_printf(o, " %s %s\n", core_speed_name(in.speed),
				       in.probed ? "yes" : "no");
		}
		if (o->full) {
			o->len = mark; /* cut at the last whole endpoint */
			o->p[o->len] = '\0';
			continue;
		}
		shown++;
	}
	bool cut = o->full;
	o->full = false;
	o->limit = o->cap;
	if (cmd->json)
		ctl_out_printf(o, "],\"shown\":%u,\"total\":%u,\"truncated\":%s}\n",
			       shown, total, cut ? "true" : "false");
	else if (cut)
		ctl_out_printf(o, "# truncated: %u of %u endpoints shown (answers are bounded to %d bytes)\n",
			       shown, total, CTL_ANSWER_MAX);
}

/* ---- show affinity, clear affinity -------------------------------------- */

void ctl_cmd_show_affinity(struct ctl_cmd *cmd)
{
	struct ctl_req r;
	uint64_t akey;
	if (ctl_cmd_request(cmd, 2, &r) < 0 || ctl_cmd_akey(cmd, &r, &akey) < 0)
		return;
	const struct core *core = cmd->ctl->srv->route.core;
	struct ctl_out *o = cmd->o;
	struct core_affinity_record rec;
	bool found = core_affinity_lookup(core, akey, cmd->now_ms, &rec) == 0;
	struct core_routers_info routers;
	core_routers_info(core, &routers);
	uint64_t ttl = routers.ttl_ms; /* alone_affinity_ttl while alone */
	uint64_t left = found && rec.idle_ms < ttl ? ttl - rec.idle_ms : 0;
	if (cmd->json) {
		ctl_out_printf(o, "{\"akey\":\"%016" PRIx64 "\",\"entry\":%s", akey,
			       found ? "true" : "false");
		if (found) {
			ctl_out_printf(o, ",\"endpoint\":");
			ctl_out_ep_name(o, core, rec.endpoint, true);
			ctl_out_printf(o, ",\"idle_ms\":%" PRIu64 ",\"ttl_left_ms\":%" PRIu64,
				       rec.idle_ms, left);
		}
		ctl_out_printf(o, "}\n");
		return;
	}
	ctl_out_printf(o, "akey: %016" PRIx64 "\n", akey);
	if (!found) {
		ctl_out_printf(o, "entry: none\n");
		return;
	}
	ctl_out_printf(o, "entry: yes\nendpoint: ");
	ctl_out_ep_name(o, core, rec.endpoint, false);
	ctl_out_printf(o, "\nidle_ms: %" PRIu64 "\nttl_left_ms: %" PRIu64 "\n",
		       rec.idle_ms, left);
}

void ctl_cmd_clear_affinity(struct ctl_cmd *cmd)
{
	struct ctl_req r;
	uint64_t akey;
	if (ctl_cmd_request(cmd, 2, &r) < 0 || ctl_cmd_akey(cmd, &r, &akey) < 0)
		return;
	bool had = core_affinity_clear(cmd->ctl->srv->route.core, akey);
	log_info("affinity entry cleared on the command socket",
		 "akey=%016" PRIx64 " found=%s", akey, had ? "true" : "false");
	if (cmd->json)
		ctl_out_printf(cmd->o, "{\"akey\":\"%016" PRIx64 "\",\"cleared\":%s}\n",
			       akey, had ? "true" : "false");
	else
		ctl_out_printf(cmd->o, "akey %016" PRIx64 ": %s\n", akey,
			       had ? "cleared" : "no entry");
}

/* ---- set endpoint ------------------------------------------------------- */

void ctl_cmd_set_endpoint(struct ctl_cmd *cmd)
{
	if (cmd->n != 4 || !(ctl_word_is(&cmd->w[3], "drain") || ctl_word_is(&cmd->w[3], "ready"))) {
		ctl_cmd_error(cmd, "usage: set endpoint <backend/server> drain|ready");
		return;
	}
	bool drain = ctl_word_is(&cmd->w[3], "drain");
	struct route *rt = &cmd->ctl->srv->route;
	int idx[ROUTE_FB_MAX_KEYS];
	struct core_str path = { cmd->w[2].p, cmd->w[2].len };
	unsigned n = route_server_find_path(rt, path, idx, ROUTE_FB_MAX_KEYS);
	if (n == 0) {
		ctl_cmd_error(cmd, "no endpoint %.*s (backend/server as HAProxy names them)",
			      (int)(path.len > 128 ? 128 : path.len), path.ptr);
		return;
	}
	for (unsigned i = 0; i < n; i++)
		core_endpoint_drain(rt->core, idx[i], drain);
	char q[300];
	log_info(drain ? "endpoint drained on the command socket"
		       : "endpoint ready again on the command socket",
		 "server=%s endpoints=%u", log_quote(q, sizeof(q), path.ptr, path.len), n);
	if (cmd->json) {
		ctl_out_printf(cmd->o, "{\"server\":");
		ctl_out_json_str(cmd->o, path.ptr, path.len);
		ctl_out_printf(cmd->o, ",\"view\":\"%s\",\"endpoints\":%u}\n",
			       drain ? "drain" : "ready", n);
	} else {
		ctl_out_printf(cmd->o, "%.*s: %s (%u endpoint%s)\n", (int)path.len,
			       path.ptr, drain ? "drain" : "ready", n, n == 1 ? "" : "s");
	}
}

/* ---- explain ------------------------------------------------------------ */

/* The load bound of an endpoint as within_bound (core/pick.h) states it, for
 * display: the largest in-flight count it may reach with this request. */
static double bound_cap(const struct core_trace *t, double weight)
{
	if (t->total_weight <= 0)
		return 0;
	return ceil(t->load_factor * ((double)t->total_in_flight + 1) * weight /
		    t->total_weight * (1 - 1e-12));
}

static void explain_text(struct ctl_cmd *cmd, const struct core *core,
			 const struct core_trace *t)
{
	struct ctl_out *o = cmd->o;
	const struct core_decision *d = &t->decision;
	ctl_out_printf(o, "1. candidates: %u of %u endpoints", t->candidates, t->n_endpoints);
	if (t->model != -1)
		ctl_out_printf(o, " (%u serve the model)", t->serving);
	ctl_out_printf(o, ", in flight %" PRIu64 ", weight ", t->total_in_flight);
	ctl_out_num(o, t->total_weight, false);
	ctl_out_printf(o, "\n");
	for (uint32_t i = 0; i < t->n_ep; i++) {
		const struct core_trace_endpoint *x = &t->ep[i];
		ctl_out_printf(o, "   ");
		ctl_out_ep_name(o, core, x->endpoint, false);
		if (x->why == CORE_TRACE_CANDIDATE)
			ctl_out_printf(o, " candidate");
		else
			ctl_out_printf(o, " excluded: %s", core_trace_excl_name(x->why));
		ctl_out_printf(o, " admin=%s breaker=%s", core_admin_name(x->admin),
			       core_breaker_name(x->breaker));
		if (x->cooldown_left_ms > 0)
			ctl_out_printf(o, " cooldown_left_ms=%" PRIu64, x->cooldown_left_ms);
		ctl_out_printf(o, " in_flight=%u weight=", x->in_flight);
		ctl_out_num(o, x->weight, false);
		ctl_out_printf(o, "\n");
	}
	if (t->n_endpoints > t->n_ep)
		ctl_out_printf(o, "   (%u more not listed)\n", t->n_endpoints - t->n_ep);
	if (t->candidates > 0) {
		ctl_out_printf(o, "   latency median_ms=");
		ctl_out_num(o, t->median[0], false);
		ctl_out_printf(o, " tolerated_ms=");
		ctl_out_num(o, t->tolerated[0], false);
		if (t->use[1]) {
			ctl_out_printf(o, " e2e_median_ms_per_kib=");
			ctl_out_num(o, t->median[1], false);
			ctl_out_printf(o, " e2e_tolerated=");
			ctl_out_num(o, t->tolerated[1], false);
		}
		ctl_out_printf(o, "\n");
	}
	if (t->has_akey)
		ctl_out_printf(o, "2. identity: akey %016" PRIx64 "\n", t->akey);
	else
		ctl_out_printf(o, "2. identity: none (power of two choices)\n");
	if (t->has_akey && t->candidates > 0) {
		ctl_out_printf(o, "3. affinity: ");
		if (!t->entry) {
			ctl_out_printf(o, "no entry\n");
		} else if (t->entry_stale) {
			ctl_out_printf(o, "entry for a removed endpoint (dropped at the next decision)\n");
		} else {
			ctl_out_printf(o, "entry -> ");
			ctl_out_ep_name(o, core, t->entry_endpoint, false);
			ctl_out_printf(o, " idle_ms=%" PRIu64, t->entry_idle_ms);
			if (t->entry_window >= 0)
				ctl_out_printf(o, " (prefix%d's: the conversation's "
					       "previous turn)", t->entry_window + 1);
			ctl_out_printf(o, ": ");
			if (!t->entry_candidate && t->home_endpoint >= 0) {
				ctl_out_printf(o, "not a candidate; back to its home in a "
					       "better tier, ");
				ctl_out_ep_name(o, core, t->home_endpoint, false);
				ctl_out_printf(o, "\n");
			} else if (!t->entry_candidate)
				ctl_out_printf(o, "not a candidate\n");
			else if (!t->entry_closed)
				ctl_out_printf(o, "breaker not closed\n");
			else if (!t->entry_fast)
				ctl_out_printf(o, "too slow (over sticky_tolerance)\n");
			else if (!t->entry_bounded)
				ctl_out_printf(o, "over the load bound\n");
			else if (!t->entry_start)
				ctl_out_printf(o, "slow from its start (slow_start_leave)\n");
			else
				ctl_out_printf(o, "warm hit\n");
			if (t->twin_endpoint >= 0) {
				ctl_out_printf(o, "   hot key (%.1f%% of the requests): "
					       "twin -> ", 100 * t->hot_share);
				ctl_out_ep_name(o, core, t->twin_endpoint, false);
				ctl_out_printf(o, ", the cheaper of the two takes it\n");
			} else if (t->twin_spread) {
				ctl_out_printf(o, "   hot key (%.1f%% of the requests) over "
					       "the load bound: off to warm a second "
					       "server (hot_share)\n", 100 * t->hot_share);
			}
		}
	}
	if (t->ranked) {
		ctl_out_printf(o, "4. rendezvous ranking (place_choices %u)\n", t->place_choices);
		for (uint32_t i = 0; i < t->n_rank; i++) {
			const struct core_trace_rank *r = &t->rank[i];
			ctl_out_printf(o, "   %u ", i + 1);
			ctl_out_ep_name(o, core, r->endpoint, false);
			ctl_out_printf(o, " score=%.6g", r->score);
			if (!r->walked) {
				ctl_out_printf(o, " not walked\n");
				continue;
			}
			ctl_out_printf(o, " fast=%s in_flight=%u", r->fast ? "yes" : "no",
				       r->in_flight);
			const char *floor = r->floor_base > t->load_floor ?
					    "load_floor_e2e" : "load_floor";
			if (r->in_flight < r->floor && !r->floor_lifted) {
				ctl_out_printf(o, " under %s %u", floor, r->floor);
				if (r->floor != r->floor_base) {
					ctl_out_printf(o, " (x ");
					ctl_out_num(o, t->floor_scale, false);
					ctl_out_printf(o, ": this HAProxy's share of the engines' load)");
				}
			} else
				ctl_out_printf(o, " +1 vs bound %.0f", bound_cap(t, r->weight));
			if (r->floor_lifted)
				ctl_out_printf(o, " (no %s: a slow server's queue on average)", floor);
			ctl_out_printf(o, ": %s cost=", r->bounded ? "within" : "over");
			ctl_out_num(o, r->cost, false);
			ctl_out_printf(o, "\n");
		}
		if (t->candidates > t->n_rank)
			ctl_out_printf(o, "   (%u more not listed)\n", t->candidates - t->n_rank);
		if (t->by_load)
			ctl_out_printf(o, "   a new key: to the first %s (%s)\n",
				       t->by_rare ? "less loaded" : "clearly less loaded",
				       t->by_long ? "place_long_z: a long prompt" :
				       t->by_rare ? "keys rarely come back here: nothing to keep on its choice" :
						    "place_load_z");
		if (t->by_wait)
			ctl_out_printf(o, "   a new key: every slot of its choice busy and none free, "
				       "to the first with fewer waiting (place_slots)\n");
		else if (t->by_slots)
			ctl_out_printf(o, "   a new key: every slot of its choice busy, to the first with one free (place_slots)\n");
		if (t->by_turn)
			ctl_out_printf(o, "   a later turn's key, new here: its rendezvous choice, "
				       "where another HAProxy can have placed it (not by load)\n");
		ctl_out_printf(o, "   load bound: in_flight + 1 <= ceil(load_factor ");
			       ctl_out_num(o, t->load_factor, false);
			       ctl_out_printf(o, " x (in flight %" PRIu64 " + 1) x weight / ", t->total_in_flight);
			       ctl_out_num(o, t->total_weight, false);
			       ctl_out_printf(o, "), or in_flight < load_floor %u", t->load_floor);
		if (t->load_floor_e2e > t->load_floor)
			ctl_out_printf(o, " (load_floor_e2e %u where its end-to-end times are scored)",
				       t->load_floor_e2e);
		ctl_out_printf(o, "\n");
	}
	if (t->p2c) {
		ctl_out_printf(o, "5. %s: ", d->reason == CORE_REASON_SPILL ? "spill, power of two choices"
			       : "power of two choices");
		ctl_out_ep_name(o, core, t->p2c_a, false);
		ctl_out_printf(o, " cost=");
		ctl_out_num(o, t->p2c_cost_a, false);
		ctl_out_printf(o, "%s vs ", t->p2c_check_a ? " (its check slow)" : "");
		ctl_out_ep_name(o, core, t->p2c_b, false);
		ctl_out_printf(o, " cost=");
		ctl_out_num(o, t->p2c_cost_b, false);
		ctl_out_printf(o, "%s%s\n", t->p2c_check_b ? " (its check slow)" : "",
			       t->p2c_equal ? " (latencies within p2c_margin: counted equal)" : "");
	}
	ctl_out_printf(o, "decision: ");
	ctl_out_ep_name(o, core, d->endpoint, false);
	ctl_out_printf(o, " reason=%s\n", core_reason_name(d->reason));
}

static void explain_json(struct ctl_cmd *cmd, const struct core *core,
			 const struct core_trace *t)
{
	struct ctl_out *o = cmd->o;
	const struct core_decision *d = &t->decision;
	ctl_out_printf(o, "{\"akey\":");
	if (t->has_akey)
		ctl_out_printf(o, "\"%016" PRIx64 "\"", t->akey);
	else
		ctl_out_printf(o, "null");
	ctl_out_printf(o, ",\"candidates\":{\"count\":%u,\"endpoints\":%u,\"serving\":%u,"
		       "\"in_flight\":%" PRIu64 ",\"weight\":",
		       t->candidates, t->n_endpoints, t->serving, t->total_in_flight);
	ctl_out_num(o, t->total_weight, true);
	ctl_out_printf(o, ",\"list\":[");
	for (uint32_t i = 0; i < t->n_ep; i++) {
		const struct core_trace_endpoint *x = &t->ep[i];
		ctl_out_printf(o, "%s{\"endpoint\":", i > 0 ? "," : "");
		ctl_out_ep_name(o, core, x->endpoint, true);
		ctl_out_printf(o, ",\"status\":\"%s\",\"admin\":\"%s\",\"breaker\":\"%s\","
			       "\"cooldown_left_ms\":%" PRIu64 ",\"in_flight\":%u}",
			       core_trace_excl_name(x->why), core_admin_name(x->admin),
			       core_breaker_name(x->breaker), x->cooldown_left_ms,
			       x->in_flight);
	}
	ctl_out_printf(o, "]},\"median_ms\":");
	ctl_out_num(o, t->median[0], true);
	ctl_out_printf(o, ",\"tolerated_ms\":");
	ctl_out_num(o, t->tolerated[0], true);
	ctl_out_printf(o, ",\"affinity\":");
	if (!t->entry) {
		ctl_out_printf(o, "null");
	} else {
		ctl_out_printf(o, "{\"endpoint\":");
		ctl_out_ep_name(o, core, t->entry_stale ? -1 : t->entry_endpoint, true);
		ctl_out_printf(o, ",\"idle_ms\":%" PRIu64 ",\"candidate\":%s,\"closed\":%s,"
			       "\"fast\":%s,\"within_bound\":%s,\"start_ok\":%s,\"home\":",
			       t->entry_idle_ms, t->entry_candidate ? "true" : "false",
			       t->entry_closed ? "true" : "false",
			       t->entry_fast ? "true" : "false",
			       t->entry_bounded ? "true" : "false",
			       t->entry_start ? "true" : "false");
		ctl_out_ep_name(o, core, t->home_endpoint, true);
		ctl_out_printf(o, ",\"hot_share\":");
		ctl_out_num(o, t->hot_share, true);
		ctl_out_printf(o, ",\"twin\":");
		ctl_out_ep_name(o, core, t->twin_endpoint, true);
		ctl_out_printf(o, ",\"twin_spread\":%s", t->twin_spread ? "true" : "false");
		if (t->entry_window >= 0)
			ctl_out_printf(o, ",\"prefix\":%d", t->entry_window + 1);
		else
			ctl_out_printf(o, ",\"prefix\":null");
		ctl_out_printf(o, "}");
	}
	ctl_out_printf(o, ",\"ranking\":");
	if (!t->ranked) {
		ctl_out_printf(o, "null");
	} else {
		ctl_out_printf(o, "[");
		for (uint32_t i = 0; i < t->n_rank; i++) {
			const struct core_trace_rank *r = &t->rank[i];
			ctl_out_printf(o, "%s{\"endpoint\":", i > 0 ? "," : "");
			ctl_out_ep_name(o, core, r->endpoint, true);
			ctl_out_printf(o, ",\"score\":%.6g,\"walked\":%s", r->score,
				       r->walked ? "true" : "false");
			if (r->walked) {
				ctl_out_printf(o, ",\"fast\":%s,\"within_bound\":%s,\"in_flight\":%u,"
					       "\"bound\":%.0f,\"floor\":%u,\"floor_lifted\":%s,\"cost\":",
					       r->fast ? "true" : "false",
					       r->bounded ? "true" : "false", r->in_flight,
					       bound_cap(t, r->weight), r->floor,
					       r->floor_lifted ? "true" : "false");
				ctl_out_num(o, r->cost, true);
			}
			ctl_out_printf(o, "}");
		}
		ctl_out_printf(o, "],\"load_bound\":{\"load_factor\":");
		ctl_out_num(o, t->load_factor, true);
		ctl_out_printf(o, ",\"load_floor\":%u,\"load_floor_e2e\":%u,\"floor_scale\":",
			       t->load_floor, t->load_floor_e2e);
		ctl_out_num(o, t->floor_scale, true);
		ctl_out_printf(o, ",\"place_choices\":%u}", t->place_choices);
	}
	ctl_out_printf(o, ",\"p2c\":");
	if (!t->p2c) {
		ctl_out_printf(o, "null");
	} else {
		ctl_out_printf(o, "[{\"endpoint\":");
		ctl_out_ep_name(o, core, t->p2c_a, true);
		ctl_out_printf(o, ",\"cost\":");
		ctl_out_num(o, t->p2c_cost_a, true);
		ctl_out_printf(o, ",\"check_slow\":%s,\"latency_equal\":%s},{\"endpoint\":",
			       t->p2c_check_a ? "true" : "false", t->p2c_equal ? "true" : "false");
		ctl_out_ep_name(o, core, t->p2c_b, true);
		ctl_out_printf(o, ",\"cost\":");
		ctl_out_num(o, t->p2c_cost_b, true);
		ctl_out_printf(o, ",\"check_slow\":%s,\"latency_equal\":%s}]",
			       t->p2c_check_b ? "true" : "false", t->p2c_equal ? "true" : "false");
	}
	ctl_out_printf(o, ",\"decision\":{\"endpoint\":");
	ctl_out_ep_name(o, core, d->endpoint, true);
	ctl_out_printf(o, ",\"reason\":\"%s\"}}\n", core_reason_name(d->reason));
}

void ctl_cmd_explain(struct ctl_cmd *cmd)
{
	struct ctl_req r;
	if (ctl_cmd_request(cmd, 1, &r) < 0)
		return;
	if (r.has_akey) {
		ctl_cmd_error(cmd, "explain takes the route arguments (session=, prefix1=, ...), not an affinity key");
		return;
	}
	struct route *rt = &cmd->ctl->srv->route;
	struct core_request cr;
	route_request_core(&r.rr, &cr);
	/* A copy: the draws p2c would make next, without taking them. */
	struct core_rng rng = rt->rng;
	struct core_decision d;
	struct core_trace *t = malloc(sizeof(*t));
	if (t == NULL || core_explain(rt->core, &cr, cmd->now_ms, &rng, &d, t) < 0) {
		free(t);
		ctl_cmd_error(cmd, "out of memory");
		return;
	}
	if (cmd->json)
		explain_json(cmd, rt->core, t);
	else
		explain_text(cmd, rt->core, t);
	free(t);
	/* Bounded by CORE_TRACE_MAX lines per step; never cut in practice. */
	if (cmd->o->full) {
		cmd->o->full = false;
		cmd->o->limit = cmd->o->cap;
		ctl_out_printf(cmd->o, cmd->json ? "\n" : "# truncated\n");
	}
}
