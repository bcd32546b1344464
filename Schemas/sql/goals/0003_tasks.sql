-- Planning tasks (seed 000; DESIGN.md section 3 "Links and tasks"): a title for one ISO week, optionally linked to one
-- of the user's goals, completed on a user-local day or not.
--
-- What a task gives its goal is derived, never stored: a task with completed_on set counts for the goal it links
-- (goal_id) in the ISO week of completed_on, deleted tasks included, so deleting a task keeps what it gave. Deleting a
-- goal sets its tasks' goal_id to NULL (the tasks stay, unlinked). Every write stamps the rows it touches with the
-- user's change sequence (users.change_seq), like goals: the change feed pages through it and cached progress sees it.
CREATE TABLE tasks (
    user_id uuid NOT NULL REFERENCES users ON DELETE CASCADE,
    id uuid NOT NULL,
    title text NOT NULL CHECK (char_length(title) BETWEEN 1 AND 200),
    -- The Monday of the week the task is planned for.
    week_start date NOT NULL CHECK (extract(isodow FROM week_start) = 1),
    -- NULL: not linked.
    goal_id uuid,
    -- The user-local day it was completed; NULL while open.
    completed_on date,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    change_seq bigint NOT NULL,
    -- The change sequence value of the task's creation: tasks in the order they were created.
    created_seq bigint NOT NULL,
    PRIMARY KEY (user_id, id),
    FOREIGN KEY (user_id, goal_id) REFERENCES goals (user_id, id)
);

CREATE INDEX tasks_by_week ON tasks (user_id, week_start, created_seq) WHERE deleted_at IS NULL;
CREATE INDEX tasks_by_goal ON tasks (user_id, goal_id) WHERE goal_id IS NOT NULL;
CREATE INDEX tasks_changes ON tasks (user_id, change_seq);
