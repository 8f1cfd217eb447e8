import './base.css';
import './allgpus.css';
import './charts.css';
import './culler.css';
import './oom.css';
