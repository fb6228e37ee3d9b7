/*
 * server.h: weir-showq's work (weir-showq(8)): the public socket, and one
 * child per connection that reads one request and answers it with the
 * queue listing (protocol: mail/showq.h).
 *
 * Bounds, so that no user can pin it: at most SHOWQ_CHILDREN children at
 * once (further connections wait in the listen backlog); a child gets
 * its request within req_ms or answers "error" and ends; a child is
 * killed (SIGALRM) answer_s seconds after the connection was taken,
 * whatever it was doing (a client that does not read).
 *
 * Trusts: nothing from its clients (the request is parsed strictly by
 * mail/showq.c); the queue as qlist.c does.  Config keys: showq_socket,
 * queue_dir, queue_split (passed in).
 */
#ifndef WEIR_SHOWQ_SERVER_H
#define WEIR_SHOWQ_SERVER_H

#define SHOWQ_CHILDREN	4

struct showq_opts {
	const char *socket;	/* showq_socket */
	const char *queue_dir;	/* queue_dir */
	unsigned queue_split;	/* queue_split */
	int req_ms;		/* deadline for the request line (-t) */
	int answer_s;		/* deadline for the whole connection (-T) */
};

/* Make the socket's folder if it is missing (0755), remove a socket file
 * a dead weir-showq left (not a live one's), bind, chmod 0666 (anyone
 * may connect), listen.  The listening descriptor; exits 111 on trouble. */
int showq_listen(const char *path);

/* Serve on lfd until killed.  Returns only on a fatal error (111). */
int showq_serve(int lfd, const struct showq_opts *o);

/* One connection (the child's work): read the request from fd within
 * o->req_ms, answer it.  0 answered; 1 refused or the client went away. */
int showq_answer(int fd, const struct showq_opts *o);

#endif
