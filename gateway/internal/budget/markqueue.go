package budget

// settledMark is a request's Settle marker: the request id's key
// (markOf) and the end of its window (stamp).
type settledMark struct {
	key markKey
	end int64
}

// markQueue is a FIFO of settle markers in blocks of markBlock: pushing and
// popping never copies more than one marker, so no operation under the
// counter's mutex moves the queue (a compacting slice copied half of it, 6
// MB at 1,000 settles a second over the five-minute window).
type markQueue struct {
	blocks [][]settledMark // the first from head, the others full but the last
	head   int
	spare  []settledMark // one emptied block, reused
}

const markBlock = 1024

func (q *markQueue) push(m settledMark) {
	n := len(q.blocks)
	if n == 0 || len(q.blocks[n-1]) == markBlock {
		b := q.spare
		q.spare = nil
		if b == nil {
			b = make([]settledMark, 0, markBlock)
		}
		q.blocks = append(q.blocks, b)
		n++
	}
	q.blocks[n-1] = append(q.blocks[n-1], m)
}

func (q *markQueue) peek() (settledMark, bool) {
	if len(q.blocks) == 0 {
		return settledMark{}, false
	}
	return q.blocks[0][q.head], true
}

// pop drops the first marker; the queue must not be empty.
func (q *markQueue) pop() {
	b := q.blocks[0]
	b[q.head] = settledMark{}
	q.head++
	if q.head < len(b) {
		return
	}
	// The first block is used up.
	q.head = 0
	q.blocks[0] = nil
	q.blocks = q.blocks[1:]
	if len(b) == markBlock {
		q.spare = b[:0]
	}
	if len(q.blocks) == 0 {
		q.blocks = nil // let the array of block headers go
	}
}
