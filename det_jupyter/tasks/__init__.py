"""Programs that run inside tasks on agents (not in the master): the shell task's SSH server
(``sshd``), and the TensorBoard task's metrics-to-event-files TensorBoard (``tensorboard``)."""
