/*
 * A loopback HTTP proxy that injects faults into the requests it relays
 * (tests/s3/test_s3_faults.c). Every request gets "Connection: close"
 * added, so each connection carries exactly one request and the requests
 * are numbered in the order they arrive (1, 2, ...).
 *
 * usage: fault_proxy UPSTREAM_PORT N MODE COUNT_FILE [KIND [N MODE KIND]...]
 *   N     the request to harm (0: none; the count is still kept), or N:M for N..M
 *   MODE  503       answer 503 SlowDown without asking the server
 *         reset     reset the connection (RST) once the request head is read
 *         truncate  relay the server's answer, cut in its middle, then reset
 *         delay     hold the request 3 s before relaying it (a stall);
 *                   delayS holds it S seconds
 *         hold      hold the request until COUNT_FILE.release exists (the
 *                   test says when: no race with the clock), then relay it
 *         corrupt   flip one byte in the middle of the request's body, for
 *                   bodies of 64 KiB or more (data parts; not the XML or
 *                   small objects), then relay it
 *         corruptget relay a ranged GET (one with a Range header) and flip
 *                   one byte in the middle of the server's answer's body,
 *                   for bodies of 64 KiB or more, keeping its headers
 *                   (status, Content-Range, ETag): other bytes under a
 *                   matching Content-Range
 *         reply:FILE answer 200 with FILE's bytes as the body, without
 *                   asking the server (a hostile or broken server's answer)
 *         307       answer 307 Temporary Redirect to another port
 *         501       answer 501 NotImplemented (a server without a feature)
 *         nocond    answer a request that carries If-None-Match or If-Match
 *                   200 (with a made-up ETag) without asking the server, and
 *                   relay the others: what a server that ignores conditional
 *                   requests answers them (the headers are signed, so they
 *                   cannot be stripped on the way)
 *         A "+" suffix ("503+") harms every request from the Nth on.
 *   KIND  which requests the rule counts and harms: "*" (any, the default),
 *         or METHOD?TEXT: the method is METHOD and the request's query holds
 *         TEXT ("PUT?partNumber=" every part of a multipart upload,
 *         "DELETE?uploadId=" its abort), or, for a TEXT that starts with
 *         '/', whose path ends with TEXT ("PUT?/checkpoint": the state file),
 *         or METHOD^HEADER: the method is METHOD and the request carries the
 *         header HEADER ("PUT^x-amz-copy-source": CopyObject and UploadPartCopy). N then numbers the requests of that
 *         kind only, so a rule does not depend on how requests of other
 *         kinds interleave with them (parts sent in parallel, retries).
 *         More rules follow as N MODE KIND triples; the first rule that
 *         harms a request decides what is done to it.
 *   COUNT_FILE  rewritten with the number of requests seen after each one;
 *         COUNT_FILE.log gets "METHOD TARGET" of every request, one a line,
 *         COUNT_FILE.harmed that of every request a rule harmed
 * Prints the port it listens on (127.0.0.1 only), then serves until killed.
 */
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

typedef struct rule {
	long harm_n, harm_to;
	char mode[16];
	char reply_file[512]; /* reply mode: the body answered */
	unsigned delay_s;     /* delay mode: seconds held */
	char method[16];      /* "" with query "": any request */
	char query[128];
	char header[64];      /* METHOD^HEADER: the header the request carries ("" otherwise) */
	atomic_long seen;     /* requests of this kind so far */
} rule;

#define MAX_RULES 8
static int upstream_port;
static rule rules[MAX_RULES];
static int nrules;
static const char *count_file;
static char release_file[600]; /* COUNT_FILE.release: ends every hold */
static char log_file[600];     /* COUNT_FILE.log: every request line */
static char harmed_file[600];  /* COUNT_FILE.harmed: every harmed request's line */
static atomic_long requests;
static pthread_mutex_t count_mu = PTHREAD_MUTEX_INITIALIZER;

static void reset_close(int fd)
{
	struct linger l = { 1, 0 };
	setsockopt(fd, SOL_SOCKET, SO_LINGER, &l, sizeof(l));
	close(fd);
}

static int write_all(int fd, const char *p, size_t n)
{
	while (n) {
		ssize_t k = send(fd, p, n, MSG_NOSIGNAL);
		if (k < 0 && errno == EINTR)
			continue;
		if (k <= 0)
			return -1;
		p += k;
		n -= (size_t)k;
	}
	return 0;
}

/* COUNT_FILE.log gets the request line of `head` */
static void log_line(const char *file, const char *head)
{
	const char *eol = strstr(head, " HTTP/");
	pthread_mutex_lock(&count_mu);
	FILE *f = fopen(file, "a");
	if (f) {
		fprintf(f, "%.*s\n", eol ? (int)(eol - head) : 0, head);
		fclose(f);
	}
	pthread_mutex_unlock(&count_mu);
}

static void log_request(const char *head)
{
	log_line(log_file, head);
}

static void record(long n)
{
	pthread_mutex_lock(&count_mu);
	char tmp[4096];
	snprintf(tmp, sizeof(tmp), "%s.tmp", count_file);
	FILE *f = fopen(tmp, "w");
	if (f) {
		fprintf(f, "%ld\n", n);
		fclose(f);
		rename(tmp, count_file);
	}
	pthread_mutex_unlock(&count_mu);
}

static long content_length(const char *head)
{
	const char *p = head;
	while ((p = strchr(p, '\n')) != NULL) {
		p++;
		if (strncasecmp(p, "content-length:", 15) == 0)
			return strtol(p + 15, NULL, 10);
	}
	return 0;
}

/* Is the request whose head is `head` ("METHOD TARGET HTTP/1.1\r\n...") of the rule's kind? */
static int kind_matches(const rule *r, const char *head)
{
	if (!r->method[0])
		return 1;
	size_t ml = strlen(r->method);
	if (strncmp(head, r->method, ml) != 0 || head[ml] != ' ')
		return 0;
	if (r->header[0]) {
		/* METHOD^HEADER: a header line of that name */
		char want[80];
		snprintf(want, sizeof(want), "\r\n%s:", r->header);
		return strcasestr(head, want) != NULL;
	}
	const char *target = head + ml + 1, *end = strpbrk(target, " \r\n");
	const char *q = memchr(target, '?', end ? (size_t)(end - target) : strlen(target));
	if (r->query[0] == '/') {
		/* "/NAME": the path ends with it */
		const char *pe = q ? q : end ? end : target + strlen(target);
		size_t ql = strlen(r->query);
		return (size_t)(pe - target) >= ql && strncmp(pe - ql, r->query, ql) == 0;
	}
	if (!q)
		return !r->query[0];
	size_t ql = strlen(r->query), avail = end ? (size_t)(end - q) : strlen(q);
	for (const char *p = q; p + ql <= q + avail; p++)
		if (strncmp(p, r->query, ql) == 0)
			return 1;
	return 0;
}

static int parse_rule(rule *r, const char *nn, const char *m, const char *kind)
{
	char *colon;
	r->harm_n = strtol(nn, &colon, 10);
	r->harm_to = *colon == ':' ? strtol(colon + 1, NULL, 10) : r->harm_n;
	if (strncmp(m, "reply:", 6) == 0) {
		snprintf(r->reply_file, sizeof(r->reply_file), "%s", m + 6);
		m = "reply";
	}
	snprintf(r->mode, sizeof(r->mode), "%s", m);
	size_t ml = strlen(r->mode);
	if (ml && r->mode[ml - 1] == '+') {
		r->harm_to = 1L << 40;
		r->mode[ml - 1] = '\0';
	}
	r->delay_s = 3;
	if (strncmp(r->mode, "delay", 5) == 0 && r->mode[5] >= '0' && r->mode[5] <= '9') {
		r->delay_s = (unsigned)strtoul(r->mode + 5, NULL, 10);
		r->mode[5] = '\0';
	}
	if (strcmp(r->mode, "503") && strcmp(r->mode, "reset") && strcmp(r->mode, "truncate") &&
		strcmp(r->mode, "delay") && strcmp(r->mode, "hold") && strcmp(r->mode, "corrupt") &&
		strcmp(r->mode, "reply") && strcmp(r->mode, "307") && strcmp(r->mode, "501") && strcmp(r->mode, "nocond") &&
		strcmp(r->mode, "corruptget") && strcmp(r->mode, "none")) {
		fprintf(stderr, "fault_proxy: unknown mode %s\n", m);
		return -1;
	}
	const char *hat = kind ? strchr(kind, '^') : NULL;
	if (hat && !strchr(kind, '?')) {
		if (hat == kind || (size_t)(hat - kind) >= sizeof(r->method) || !hat[1] || strlen(hat + 1) >= sizeof(r->header)) {
			fprintf(stderr, "fault_proxy: KIND %s is not METHOD^HEADER\n", kind);
			return -1;
		}
		snprintf(r->method, sizeof(r->method), "%.*s", (int)(hat - kind), kind);
		snprintf(r->header, sizeof(r->header), "%s", hat + 1);
	} else if (kind && strcmp(kind, "*") != 0) {
		const char *q = strchr(kind, '?');
		if (!q || q == kind || (size_t)(q - kind) >= sizeof(r->method) || strlen(q + 1) >= sizeof(r->query)) {
			fprintf(stderr, "fault_proxy: KIND %s is not METHOD?TEXT\n", kind);
			return -1;
		}
		snprintf(r->method, sizeof(r->method), "%.*s", (int)(q - kind), kind);
		snprintf(r->query, sizeof(r->query), "%s", q + 1);
	}
	atomic_init(&r->seen, 0);
	return 0;
}

/* corrupt mode: flip the body byte at `at` when it lies in this piece (seen: body bytes before it) */
static void flip_in(char *p, size_t k, long *seen, long at)
{
	if (at >= *seen && at < *seen + (long)k)
		p[at - *seen] ^= 0x5a;
	*seen += (long)k;
}

/*
 * corruptget: the answer's head is collected (up to its blank line) to learn
 * its Content-Length; then the body byte in the middle is flipped.
 */
typedef struct {
	int on;
	char head[8192];
	size_t hn;
	int in_body;
	long body_len, seen;
} answer_flip;

static void answer_flip_in(answer_flip *a, char *p, size_t k)
{
	size_t at = 0;
	while (a->on && !a->in_body && at < k) {
		if (a->hn < sizeof(a->head) - 1)
			a->head[a->hn++] = p[at];
		a->head[a->hn] = '\0';
		at++;
		if (a->hn >= 4 && memcmp(a->head + a->hn - 4, "\r\n\r\n", 4) == 0) {
			a->in_body = 1;
			a->body_len = content_length(a->head);
		}
	}
	if (a->on && a->in_body && a->body_len >= 65536)
		flip_in(p + at, k - at, &a->seen, a->body_len / 2);
}

/* Read a body sent without waiting for 100-continue, so an answer of ours is not lost to a reset. */
static void drain_body(int c, const char *head, size_t hn, size_t head_len)
{
	long want = strcasestr(head, "100-continue") ? 0 : content_length(head) - (long)(hn - head_len);
	char sink[65536];
	while (want > 0) {
		ssize_t k = recv(c, sink, sizeof(sink), 0);
		if (k <= 0)
			break;
		want -= k;
	}
}

/* reply: 200 with the file's bytes; 307: a redirect to a port nothing listens on. Then close. */
static void answer_canned(int c, const char *mode, const char *file)
{
	char headbuf[512];
	if (strcmp(mode, "501") == 0) {
		static const char body[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>NotImplemented</Code>"
					   "<Message>injected by fault_proxy</Message></Error>";
		int hn = snprintf(headbuf, sizeof(headbuf), "HTTP/1.1 501 Not Implemented\r\nContent-Type: application/xml\r\n"
			"Content-Length: %zu\r\nConnection: close\r\n\r\n%s", sizeof(body) - 1, body);
		write_all(c, headbuf, (size_t)hn);
		close(c);
		return;
	}
	if (strcmp(mode, "307") == 0) {
		int hn = snprintf(headbuf, sizeof(headbuf), "HTTP/1.1 307 Temporary Redirect\r\n"
			"Location: http://127.0.0.1:9/elsewhere\r\nContent-Length: 0\r\nConnection: close\r\n\r\n");
		write_all(c, headbuf, (size_t)hn);
		close(c);
		return;
	}
	FILE *f = fopen(file, "rb");
	char *body = NULL;
	long bn = 0;
	if (f && fseek(f, 0, SEEK_END) == 0 && (bn = ftell(f)) >= 0 && fseek(f, 0, SEEK_SET) == 0 &&
		(body = malloc((size_t)bn + 1)) != NULL && fread(body, 1, (size_t)bn, f) == (size_t)bn) {
		int hn = snprintf(headbuf, sizeof(headbuf), "HTTP/1.1 200 OK\r\nContent-Type: application/xml\r\n"
			"Content-Length: %ld\r\nConnection: close\r\n\r\n", bn);
		if (write_all(c, headbuf, (size_t)hn) == 0)
			write_all(c, body, (size_t)bn);
		close(c);
	} else {
		fprintf(stderr, "fault_proxy: cannot read reply file %s\n", file);
		reset_close(c);
	}
	free(body);
	if (f)
		fclose(f);
}

static void *serve(void *arg)
{
	int c = (int)(intptr_t)arg;
	char head[65536];
	size_t hn = 0;
	char *end = NULL;
	while (!end && hn < sizeof(head) - 1) {
		ssize_t k = recv(c, head + hn, sizeof(head) - 1 - hn, 0);
		if (k <= 0) {
			close(c);
			return NULL;
		}
		hn += (size_t)k;
		head[hn] = '\0';
		end = strstr(head, "\r\n\r\n");
	}
	if (!end) {
		reset_close(c);
		return NULL;
	}
	long n = atomic_fetch_add(&requests, 1) + 1;
	log_request(head);
	record(n);
	const char *mode = "none";
	const rule *harming = NULL;
	unsigned delay_s = 0;
	for (int i = 0; i < nrules; i++) {
		rule *r = &rules[i];
		if (!kind_matches(r, head))
			continue;
		long k = atomic_fetch_add(&r->seen, 1) + 1;
		if (strcmp(mode, "none") == 0 && r->harm_n > 0 && k >= r->harm_n && k <= r->harm_to) {
			mode = r->mode;
			delay_s = r->delay_s;
			harming = r;
		}
	}
	int harm = strcmp(mode, "none") != 0;
	if (harm)
		log_line(harmed_file, head);
	size_t head_len = (size_t)(end + 4 - head);
	if (harm && strcmp(mode, "reset") == 0) {
		reset_close(c);
		return NULL;
	}
	if (harm && strcmp(mode, "503") == 0) {
		drain_body(c, head, hn, head_len);
		static const char body[] = "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n<Error><Code>SlowDown</Code>"
					   "<Message>injected by fault_proxy</Message></Error>";
		char resp[512];
		int rn = snprintf(resp, sizeof(resp),
			"HTTP/1.1 503 Slow Down\r\nContent-Type: application/xml\r\nContent-Length: %zu\r\n"
			"Connection: close\r\n\r\n%s", sizeof(body) - 1, body);
		write_all(c, resp, (size_t)rn);
		close(c);
		return NULL;
	}
	if (harm && strcmp(mode, "nocond") == 0 && (strcasestr(head, "\r\nif-none-match:") || strcasestr(head, "\r\nif-match:"))) {
		drain_body(c, head, hn, head_len);
		static const char ok200[] = "HTTP/1.1 200 OK\r\nETag: \"00000000000000000000000000000000\"\r\n"
					    "Content-Length: 0\r\nConnection: close\r\n\r\n";
		write_all(c, ok200, sizeof(ok200) - 1);
		close(c);
		return NULL;
	}
	if (harm && (strcmp(mode, "reply") == 0 || strcmp(mode, "307") == 0 || strcmp(mode, "501") == 0)) {
		drain_body(c, head, hn, head_len);
		answer_canned(c, mode, harming->reply_file);
		return NULL;
	}
	if (harm && strcmp(mode, "delay") == 0)
		sleep(delay_s);
	if (harm && strcmp(mode, "hold") == 0)
		while (access(release_file, F_OK) != 0)
			usleep(10000);
	int u = socket(AF_INET, SOCK_STREAM, 0);
	struct sockaddr_in a = { 0 };
	a.sin_family = AF_INET;
	a.sin_port = htons((unsigned short)upstream_port);
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	if (u < 0 || connect(u, (struct sockaddr *)&a, sizeof(a)) < 0) {
		reset_close(c);
		if (u >= 0)
			close(u);
		return NULL;
	}
	/* the request line, our Connection: close, the other headers (any Connection header of the client's dropped) */
	char *eol = strstr(head, "\r\n");
	size_t first = (size_t)(eol + 2 - head);
	int ok = write_all(u, head, first) == 0 && write_all(u, "Connection: close\r\n", 19) == 0;
	for (char *line = head + first; ok && line < head + head_len;) {
		char *le = strstr(line, "\r\n") + 2;
		if (strncasecmp(line, "connection:", 11) != 0)
			ok = write_all(u, line, (size_t)(le - line)) == 0;
		line = le;
	}
	long body_len = content_length(head), body_seen = 0;
	long flip_at = harm && strcmp(mode, "corrupt") == 0 && body_len >= 65536 ? body_len / 2 : -1;
	if (ok && hn > head_len) {
		flip_in(head + head_len, hn - head_len, &body_seen, flip_at);
		ok = write_all(u, head + head_len, hn - head_len) == 0;
	}
	int truncate = harm && strcmp(mode, "truncate") == 0;
	answer_flip aflip = { 0 };
	aflip.on = harm && strcmp(mode, "corruptget") == 0 && strncmp(head, "GET ", 4) == 0 && strcasestr(head, "\r\nrange:");
	long relayed = 0, cut = -1;
	struct pollfd p[2] = { { c, POLLIN, 0 }, { u, POLLIN, 0 } };
	char buf[65536];
	int c_open = 1;
	while (ok) {
		p[0].fd = c_open ? c : -1;
		if (poll(p, 2, -1) < 0) {
			if (errno == EINTR)
				continue;
			break;
		}
		if (c_open && (p[0].revents & (POLLIN | POLLHUP | POLLERR))) {
			ssize_t k = recv(c, buf, sizeof(buf), 0);
			if (k <= 0) {
				c_open = 0;
				shutdown(u, SHUT_WR);
			} else {
				flip_in(buf, (size_t)k, &body_seen, flip_at);
				if (write_all(u, buf, (size_t)k) < 0)
					break;
			}
		}
		if (p[1].revents & (POLLIN | POLLHUP | POLLERR)) {
			ssize_t k = recv(u, buf, sizeof(buf), 0);
			if (k <= 0)
				break;
			if (truncate && cut < 0) {
				/* cut in the middle of the answer: half of what came in the first read */
				cut = k / 2 > 0 ? k / 2 : 1;
			}
			answer_flip_in(&aflip, buf, (size_t)k);
			size_t send_n = (size_t)k;
			if (truncate && relayed + k > cut)
				send_n = (size_t)(cut - relayed);
			if (send_n && write_all(c, buf, send_n) < 0)
				break;
			relayed += (long)send_n;
			if (truncate && relayed >= cut) {
				reset_close(c);
				close(u);
				return NULL;
			}
		}
	}
	close(u);
	close(c);
	return NULL;
}

int main(int argc, char **argv)
{
	if (argc < 5 || (argc > 6 && (argc - 6) % 3 != 0) || 1 + (argc > 6 ? (argc - 6) / 3 : 0) > MAX_RULES) {
		fprintf(stderr, "usage: fault_proxy UPSTREAM_PORT N MODE COUNT_FILE [KIND [N MODE KIND]...]\n");
		return 2;
	}
	signal(SIGPIPE, SIG_IGN);
	upstream_port = atoi(argv[1]);
	if (parse_rule(&rules[nrules++], argv[2], argv[3], argc > 5 ? argv[5] : NULL) < 0)
		return 2;
	for (int i = 6; i + 2 < argc; i += 3)
		if (parse_rule(&rules[nrules++], argv[i], argv[i + 1], argv[i + 2]) < 0)
			return 2;
	count_file = argv[4];
	snprintf(release_file, sizeof(release_file), "%s.release", count_file);
	snprintf(log_file, sizeof(log_file), "%s.log", count_file);
	snprintf(harmed_file, sizeof(harmed_file), "%s.harmed", count_file);
	record(0);
	int s = socket(AF_INET, SOCK_STREAM, 0);
	int one = 1;
	setsockopt(s, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
	struct sockaddr_in a = { 0 };
	a.sin_family = AF_INET;
	a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
	socklen_t al = sizeof(a);
	if (bind(s, (struct sockaddr *)&a, sizeof(a)) < 0 || listen(s, 128) < 0 ||
		getsockname(s, (struct sockaddr *)&a, &al) < 0) {
		perror("fault_proxy");
		return 1;
	}
	printf("%d\n", ntohs(a.sin_port));
	fflush(stdout);
	for (;;) {
		int c = accept(s, NULL, NULL);
		if (c < 0) {
			if (errno == EINTR)
				continue;
			return 1;
		}
		pthread_t t;
		if (pthread_create(&t, NULL, serve, (void *)(intptr_t)c) == 0)
			pthread_detach(t);
		else
			close(c);
	}
}
